#include "console/message_view.h"

#include <gtest/gtest.h>

namespace sluice::console {
namespace {

TEST(MessageViewTest, JsonTextAndBinary) {
  EXPECT_EQ(ShowBytes(R"({"a": [1, 2.50, "x"]})", BinaryAs::kHex).encoding, "json");
  EXPECT_EQ(ShowBytes(R"({"a": [1, 2.50, "x"]})", BinaryAs::kHex).text, R"({"a": [1, 2.50, "x"]})");
  EXPECT_EQ(ShowBytes("42", BinaryAs::kHex).encoding, "json");
  EXPECT_EQ(ShowBytes("hello world", BinaryAs::kHex).encoding, "text");
  EXPECT_EQ(ShowBytes("{\"a\": ", BinaryAs::kHex).encoding, "text");  // not whole JSON
  EXPECT_EQ(ShowBytes("", BinaryAs::kHex).encoding, "text");
  EXPECT_EQ(ShowBytes("gr\xC3\xBC\xC3\x9F", BinaryAs::kHex).encoding, "text");
  ShownBytes bin = ShowBytes(std::string("\x00\xff\x10", 3), BinaryAs::kHex);
  EXPECT_EQ(bin.encoding, "hex");
  EXPECT_EQ(bin.text, "00ff10");
  bin = ShowBytes(std::string("\x00\xff\x10", 3), BinaryAs::kBase64);
  EXPECT_EQ(bin.encoding, "base64");
  EXPECT_EQ(bin.text, "AP8Q");
  // UTF-8 with control characters is binary (a Schema Registry's framing starts with NUL);
  // tabs and line breaks are text.
  EXPECT_EQ(ShowBytes(std::string("\x00\x00\x00\x00\x01\x08Os", 8), BinaryAs::kHex).encoding,
            "hex");
  EXPECT_EQ(ShowBytes("a\x1b[31mred", BinaryAs::kHex).encoding, "hex");
  EXPECT_EQ(ShowBytes("a\tb\r\nc\n", BinaryAs::kHex).encoding, "text");
  // Overlong and surrogate forms are not UTF-8.
  EXPECT_EQ(ShowBytes("\xC0\xAF", BinaryAs::kHex).encoding, "hex");
  EXPECT_EQ(ShowBytes("\xED\xA0\x80", BinaryAs::kHex).encoding, "hex");
}

TEST(MessageViewTest, LongValuesAreCutAtACodePoint) {
  std::string text(kMaxShownBytes - 1, 'a');
  text += "\xC3\xBC";  // a two-byte character across the cut
  text += "tail";
  ShownBytes shown = ShowBytes(text, BinaryAs::kHex);
  EXPECT_TRUE(shown.truncated);
  EXPECT_EQ(shown.encoding, "text");
  EXPECT_EQ(shown.text, std::string(kMaxShownBytes - 1, 'a'));
  // Long JSON is shown as text once cut (it no longer parses).
  std::string json = "[" + std::string(kMaxShownBytes, '1') + "]";
  shown = ShowBytes(json, BinaryAs::kHex);
  EXPECT_TRUE(shown.truncated);
  EXPECT_EQ(shown.encoding, "text");
  std::string binary(kMaxShownBytes + 10, '\xff');
  shown = ShowBytes(binary, BinaryAs::kHex);
  EXPECT_TRUE(shown.truncated);
  EXPECT_EQ(shown.text.size(), kMaxShownBytes * 2);
}

}  // namespace
}  // namespace sluice::console
