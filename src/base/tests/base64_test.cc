#include "base/base64.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Base64Test, EncodesRfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, RoundTripsEveryByteAndLength) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t len = 0; len <= all.size(); len += 1) {
    std::string s = all.substr(all.size() - len);
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
}

TEST(Base64Test, RejectsMalformedText) {
  EXPECT_FALSE(Base64Decode("Zm9").ok());       // not a multiple of 4
  EXPECT_FALSE(Base64Decode("Zm9v\n").ok());    // whitespace
  EXPECT_FALSE(Base64Decode("Zm!v").ok());      // outside the alphabet
  EXPECT_FALSE(Base64Decode("Z===").ok());      // three '='
  EXPECT_FALSE(Base64Decode("====").ok());      // only padding
  EXPECT_FALSE(Base64Decode("Zg==Zg==").ok());  // '=' before the end
  EXPECT_FALSE(Base64Decode("Zm=v").ok());      // '=' inside the last group
  EXPECT_FALSE(Base64Decode("Zh==").ok());      // non-zero unused bits
  EXPECT_FALSE(Base64Decode("Zm9=").ok());      // non-zero unused bits
  EXPECT_FALSE(Base64Decode("Zm9v_-==").ok());  // URL-safe alphabet is not this one
  EXPECT_FALSE(Base64Decode(std::string_view("Zm\0v", 4)).ok());
  EXPECT_EQ(Base64Decode("").value(), "");
}

}  // namespace
}  // namespace sluice
