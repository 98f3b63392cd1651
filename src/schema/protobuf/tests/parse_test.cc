// Parse, Canonical/Normalized, the base64 descriptor form, message indexes and the
// compatibility rules (Confluent's Protobuf diff).
#include <gtest/gtest.h>

#include "schema/protobuf/internal.h"
#include "schema/protobuf/protobuf_format.h"
#include "schema/protobuf/tests/test_util.h"

namespace sluice::schema::protobuf {
namespace {

using testing::MustParse;
using testing::Wire;

constexpr const char* kOrder = R"(
// An order.
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";

/* A block
   comment */
message Order {
  string id = 1;
  int64 amount = 2 [deprecated = true];
  repeated string tags = 3;
  map<string, int32> counts = 4;
  google.protobuf.Timestamp created = 5;
  Status status = 6;
  Line line = 7;
  oneof payment {
    string card = 8;
    string iban = 9;
  }
  optional double discount = 10;
  reserved 15, 20 to 25;
  reserved "old";
  message Line {
    string sku = 1;
    uint32 qty = 2;
  }
  enum Status {
    STATUS_UNKNOWN = 0;
    STATUS_PAID = 1;
  }
}
service Shop {
  rpc Place (Order) returns (Order) { option deprecated = true; }
}
)";

TEST(ProtobufParseTest, ParsesProto3WithNestedTypesAndWellKnownImports) {
  Parsed p = MustParse(kOrder);
  ASSERT_EQ(p.file->messages.size(), 1u);
  const MessageType& m = p.file->messages[0];
  EXPECT_EQ(m.full_name, "shop.v1.Order");
  ASSERT_EQ(m.fields.size(), 10u);
  EXPECT_TRUE(m.fields[3].is_map);
  EXPECT_EQ(m.fields[4].full_type_name, "google.protobuf.Timestamp");
  EXPECT_EQ(m.fields[5].type, FieldType::kEnum);
  EXPECT_EQ(m.fields[5].full_type_name, "shop.v1.Order.Status");
  EXPECT_EQ(m.fields[6].message, &m.messages[0]);
  EXPECT_EQ(m.fields[7].oneof, 0);
  EXPECT_TRUE(m.fields[9].proto3_optional);
  EXPECT_EQ(p.imports.size(), 1u);
}

TEST(ProtobufParseTest, ParsesProto2LabelsDefaultsGroupsAndExtensions) {
  Parsed p = MustParse(R"(
    syntax = "proto2";
    package legacy;
    message Search {
      required string query = 1;
      optional int32 page = 2 [default = 0x10];
      optional int32 octal = 3 [default = 017];
      optional string name = 4 [default = "a\"b\x41\101\n"];
      repeated group Result = 5 {
        required string url = 6;
      }
      extensions 100 to max;
      optional Kind kind = 7 [default = B];
      enum Kind { option allow_alias = true; A = 1; B = 2; C = 2; reserved 10 to 20; reserved "Z"; }
    }
    extend Search { optional int32 extra = 100; }
  )");
  const MessageType& m = p.file->messages[0];
  EXPECT_EQ(m.fields[0].label, Label::kRequired);
  EXPECT_EQ(m.fields[1].default_value, "0x10");
  EXPECT_EQ(m.fields[3].default_value, R"("a\"bAA\n")");
  EXPECT_EQ(m.fields[4].type, FieldType::kGroup);
  EXPECT_EQ(m.fields[4].name, "result");
  ASSERT_EQ(m.extension_ranges.size(), 1u);
  EXPECT_EQ(m.extension_ranges[0].end, (1 << 29) - 1);
  // Canonical text parses again to the same text.
  std::string c = Canonical(p);
  Parsed again = MustParse(c);
  EXPECT_EQ(Canonical(again), c);
  EXPECT_NE(c.find("repeated group Result = 5 {"), std::string::npos) << c;
}

TEST(ProtobufParseTest, ImportsResolveThroughReferences) {
  std::vector<Reference> refs = {
      {"common/money.proto",
       "syntax = \"proto3\"; package common; message Money { int64 units = 1; string currency = 2; "
       "}"},
  };
  Parsed p = MustParse(R"(
    syntax = "proto3";
    package shop;
    import "common/money.proto";
    import public "google/protobuf/wrappers.proto";
    message Price { common.Money money = 1; .common.Money other = 2; google.protobuf.StringValue note = 3; }
  )",
                       refs);
  EXPECT_EQ(p.file->messages[0].fields[0].full_type_name, "common.Money");
  EXPECT_EQ(p.file->messages[0].fields[1].full_type_name, "common.Money");
  auto missing =
      Parse("syntax = \"proto3\";\nimport \"nope.proto\";\nmessage A { int32 a = 1; }", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("2:1: import \"nope.proto\" not found"),
            std::string::npos)
      << missing.status().message();
}

struct BadSchema {
  const char* text;
  const char* error;  // a part of the message, with its position
};

TEST(ProtobufParseTest, BadSchemasAreInvalidArgumentWithPositions) {
  const BadSchema cases[] = {
      {"syntax = \"proto3\";\nmessage A {\n  int32 a = 0;\n}", "3:13: field number 0"},
      {"syntax = \"proto3\";\nmessage A { int32 a = 536870912; }", "2:23: field number 536870912"},
      {"syntax = \"proto3\";\nmessage A { int32 a = 19500; }",
       "2:23: field number 19500 is reserved"},
      {"syntax = \"proto3\";\nmessage A {\n int32 a = 1;\n string b = 1; }",
       "4:2: field 'b': number 1 is used twice"},
      {"syntax = \"proto3\";\nmessage A { Missing a = 1; }",
       "2:13: field 'a': unknown type 'Missing'"},
      {"syntax = \"proto3\";\nmessage A { int32 a = 1 }", "2:25: expected ';'"},
      {"syntax = \"proto3\";\nmessage A { string a = 1; /* open", "unterminated comment"},
      {"syntax = \"proto3\";\nmessage A { string a = 1 [default = \"x]; }", "unterminated string"},
      {"syntax = \"proto4\";", "1:10: unknown syntax"},
      {"syntax = \"proto2\";\nmessage A { int32 a = 1; }", "2:13: proto2 fields need a label"},
      {"syntax = \"proto3\";\nmessage A { required int32 a = 1; }",
       "required fields are not allowed"},
      {"syntax = \"proto3\";\nmessage A { reserved 2; int32 a = 2; }", "number 2 is reserved"},
      {"syntax = \"proto3\";\nenum E { A = 1; }", "needs a value 0"},
      {"syntax = \"proto3\";\nenum E { A = 0; B = 0; }", "uses 0 twice"},
      {"syntax = \"proto3\";\nmessage A { map<float, int32> m = 1; }", "cannot be a map key"},
      {"message", "expected a name"},
      {"", ""},
  };
  for (const BadSchema& c : cases) {
    auto p = Parse(c.text, {});
    if (std::string_view(c.text).empty()) {
      EXPECT_TRUE(p.ok());  // an empty file is a valid (empty) schema
      continue;
    }
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.error), std::string::npos)
        << c.text << " -> " << p.status().message();
  }
}

TEST(ProtobufParseTest, CanonicalTextReparsesToItself) {
  Parsed p = MustParse(kOrder);
  std::string c = Canonical(p);
  EXPECT_EQ(c.substr(0, 37), "syntax = \"proto3\";\npackage shop.v1;\n\n") << c;
  Parsed again = MustParse(c);
  EXPECT_EQ(Canonical(again), c);
  EXPECT_EQ(c.find("service"), std::string::npos);
  EXPECT_NE(c.find("  map<string, int32> counts = 4;\n"), std::string::npos) << c;
  EXPECT_NE(c.find("  oneof payment {\n    string card = 8;"), std::string::npos) << c;
  EXPECT_NE(c.find("  optional double discount = 10;"), std::string::npos) << c;
  EXPECT_NE(c.find("  reserved 15, 20 to 25;\n  reserved \"old\";"), std::string::npos) << c;
}

TEST(ProtobufParseTest, NormalizedIsIndependentOfOrder) {
  Parsed a = MustParse(R"(syntax = "proto3";
    import "google/protobuf/wrappers.proto";
    import "google/protobuf/timestamp.proto";
    option java_package = "x"; option go_package = "y";
    message M { string b = 2; google.protobuf.Timestamp a = 1; reserved 9, 7; }
  )");
  Parsed b = MustParse(R"(syntax = "proto3";
    import "google/protobuf/timestamp.proto";
    import "google/protobuf/wrappers.proto";
    option go_package = "y"; option java_package = "x";
    message M { reserved 7; reserved 9; .google.protobuf.Timestamp a = 1; string b = 2; }
  )");
  EXPECT_NE(Canonical(a), Canonical(b));
  EXPECT_EQ(Normalized(a), Normalized(b));
  Parsed again = MustParse(Normalized(a));
  EXPECT_EQ(Normalized(again), Normalized(a));
  EXPECT_NE(Normalized(a).find(".google.protobuf.Timestamp a = 1;"), std::string::npos)
      << Normalized(a);
}

// A FileDescriptorProto by hand, as confluent-kafka's Python client registers it.
std::string OrderDescriptor() {
  Wire entry;  // map<string, int64> CountsEntry
  entry.Bytes(1, "CountsEntry")
      .Message(2, Wire().Bytes(1, "key").Varint(3, 1).Varint(4, 1).Varint(5, 9))
      .Message(2, Wire().Bytes(1, "value").Varint(3, 2).Varint(4, 1).Varint(5, 3))
      .Message(7, Wire().Varint(7, 1));
  Wire order;
  order.Bytes(1, "Order")
      .Message(2, Wire().Bytes(1, "id").Varint(3, 1).Varint(4, 1).Varint(5, 9))
      .Message(2, Wire()
                      .Bytes(1, "created")
                      .Varint(3, 2)
                      .Varint(4, 1)
                      .Varint(5, 11)
                      .Bytes(6, ".google.protobuf.Timestamp"))
      .Message(2, Wire()
                      .Bytes(1, "counts")
                      .Varint(3, 3)
                      .Varint(4, 3)
                      .Varint(5, 11)
                      .Bytes(6, ".shop.Order.CountsEntry"))
      .Message(
          2,
          Wire().Bytes(1, "note").Varint(3, 4).Varint(4, 1).Varint(5, 9).Varint(9, 0).Varint(17, 1))
      .Message(2, Wire().Bytes(1, "card").Varint(3, 5).Varint(4, 1).Varint(5, 9).Varint(9, 1))
      .Message(
          2, Wire().Bytes(1, "kind").Varint(3, 6).Varint(4, 1).Varint(5, 14).Bytes(6, ".shop.Kind"))
      .Message(3, entry)
      .Message(8, Wire().Bytes(1, "_note"))
      .Message(8, Wire().Bytes(1, "pay"));
  Wire file;
  file.Bytes(1, "order.proto")
      .Bytes(2, "shop")
      .Bytes(3, "google/protobuf/timestamp.proto")
      .Message(4, order)
      .Message(5, Wire()
                      .Bytes(1, "Kind")
                      .Message(2, Wire().Bytes(1, "KIND_A").Varint(2, 0))
                      .Message(2, Wire().Bytes(1, "KIND_B").Varint(2, 1)))
      .Message(8, Wire().Bytes(1, "com.shop"))
      .Bytes(12, "proto3");
  return file.str();
}

std::string Base64(std::string_view in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

TEST(ProtobufParseTest, Base64DescriptorParsesAndPrintsAsProtoText) {
  Parsed p = MustParse(Base64(OrderDescriptor()));
  const MessageType& m = p.file->messages[0];
  EXPECT_EQ(m.full_name, "shop.Order");
  EXPECT_TRUE(m.messages.empty());  // the map entry became a map field
  ASSERT_EQ(m.fields.size(), 6u);
  EXPECT_TRUE(m.fields[2].is_map);
  EXPECT_EQ(m.fields[2].type, FieldType::kInt64);
  EXPECT_EQ(m.fields[3].label, Label::kOptional);  // proto3 optional, synthetic oneof dropped
  EXPECT_EQ(m.fields[3].oneof, -1);
  EXPECT_EQ(m.fields[4].oneof, 0);
  ASSERT_EQ(m.oneofs.size(), 1u);
  EXPECT_EQ(m.oneofs[0].name, "pay");
  std::string c = Canonical(p);
  EXPECT_EQ(c, R"(syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

option java_package = "com.shop";

message Order {
  string id = 1;
  .google.protobuf.Timestamp created = 2;
  map<string, int64> counts = 3;
  optional string note = 4;
  .shop.Kind kind = 6;
  oneof pay {
    string card = 5;
  }
}
enum Kind {
  KIND_A = 0;
  KIND_B = 1;
}
)");
  // The same schema as text is the same canonical text, up to how types are named.
  Parsed again = MustParse(c);
  EXPECT_EQ(Canonical(again), c);
  auto bad = Parse(Base64(OrderDescriptor().substr(0, 40)), {});
  EXPECT_FALSE(bad.ok());
}

TEST(ProtobufMessageIndexesTest, ReadWriteAndFind) {
  std::string out;
  WriteMessageIndexes(std::vector<int>{0}, &out);
  EXPECT_EQ(out, std::string(1, '\0'));
  out.clear();
  WriteMessageIndexes(std::vector<int>{1, 0, 2}, &out);
  EXPECT_EQ(out, std::string("\x06\x02\x00\x04", 4));
  std::vector<int> idx;
  size_t used = 0;
  std::string why;
  ASSERT_TRUE(ReadMessageIndexes(out + "rest", &idx, &used, &why));
  EXPECT_EQ(idx, (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(used, 4u);
  ASSERT_TRUE(ReadMessageIndexes(std::string(1, '\0'), &idx, &used, &why));
  EXPECT_EQ(idx, std::vector<int>{0});
  EXPECT_FALSE(ReadMessageIndexes("", &idx, &used, &why));
  EXPECT_FALSE(ReadMessageIndexes("\x06\x02", &idx, &used, &why));  // truncated
  EXPECT_FALSE(ReadMessageIndexes("\x01", &idx, &used, &why));      // count -1
  EXPECT_FALSE(ReadMessageIndexes("\x02\x01", &idx, &used, &why));  // index -1
  EXPECT_FALSE(
      ReadMessageIndexes("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", &idx, &used, &why));

  Parsed p = MustParse(R"(syntax = "proto3"; package a;
    message A { message B { int32 x = 1; } message C { message D { int32 y = 1; } } }
    message E { int32 z = 1; })");
  EXPECT_EQ((*FindMessage(p, std::vector<int>{0}))->full_name, "a.A");
  EXPECT_EQ((*FindMessage(p, std::vector<int>{0, 1, 0}))->full_name, "a.A.C.D");
  EXPECT_EQ((*FindMessage(p, std::vector<int>{1}))->full_name, "a.E");
  EXPECT_FALSE(FindMessage(p, std::vector<int>{2}).ok());
  EXPECT_FALSE(FindMessage(p, std::vector<int>{0, 5}).ok());
  EXPECT_EQ(*MessageIndexesOf(p, "a.A.C.D"), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(*MessageIndexesOf(p, "E"), (std::vector<int>{1}));
  EXPECT_FALSE(MessageIndexesOf(p, "a.Z").ok());
}

// ---- compatibility ----

std::vector<std::string> Check(const std::string& reader, const std::string& writer,
                               const std::vector<Reference>& refs = {}) {
  Parsed r = MustParse(reader, refs);
  Parsed w = MustParse(writer, refs);
  return Incompatibilities(r, w);
}

using Diffs = std::vector<std::string>;

TEST(ProtobufCompatTest, CompatibleChanges) {
  const char* base = R"(syntax = "proto3"; package p;
    message Order { string id = 1; int32 qty = 2; oneof pay { string card = 3; string iban = 4; } }
    enum E { A = 0; B = 1; })";
  // Field added, field removed, renamed, new message, enum constants, oneof member added.
  EXPECT_EQ(Check(R"(syntax = "proto3"; package p;
    message Order { string ident = 1; int32 qty = 2; string note = 5;
      oneof pay { string card = 3; string iban = 4; string cash = 6; } }
    message Extra { int32 x = 1; }
    enum E { A = 0; C = 1; D = 2; })",
                  base),
            Diffs{});
  EXPECT_EQ(Check(R"(syntax = "proto3"; package p; message Order { string id = 1; })", base),
            Diffs{});
  // Compatible scalar groups: int32 <-> int64/uint32/bool/enum, string <-> bytes,
  // sint32 <-> sint64, fixed32 <-> sfixed32.
  EXPECT_EQ(Check("syntax = \"proto3\"; message M { int64 a = 1; bytes b = 2; sint64 c = 3; "
                  "sfixed32 d = 4; E e = 5; } enum E { Z = 0; }",
                  "syntax = \"proto3\"; message M { int32 a = 1; string b = 2; sint32 c = 3; "
                  "fixed32 d = 4; int32 e = 5; }"),
            Diffs{});
  // Moving a oneof member to the top level; removing a whole oneof; reordering messages.
  EXPECT_EQ(Check("syntax = \"proto3\"; message B { int32 y = 1; } message A { string card = 3; "
                  "string iban = 4; }",
                  "syntax = \"proto3\"; message A { oneof pay { string card = 3; string iban = 4; "
                  "} } message B { int32 y = 1; }"),
            Diffs{});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { int32 x = 1; }",
                  "syntax = \"proto3\"; message A { int32 x = 1; oneof pay { string card = 3; "
                  "string iban = 4; } }"),
            Diffs{});
  // A string field becoming repeated (label change of a string) is compatible.
  EXPECT_EQ(Check("syntax = \"proto2\"; message A { repeated string s = 1; }",
                  "syntax = \"proto2\"; message A { optional string s = 1; }"),
            Diffs{});
}

TEST(ProtobufCompatTest, IncompatibleChanges) {
  EXPECT_EQ(Check("syntax = \"proto3\"; package q; message A { int32 x = 1; }",
                  "syntax = \"proto3\"; package p; message A { int32 x = 1; }"),
            Diffs{"PACKAGE_CHANGED at #/"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { int32 x = 1; }",
                  "syntax = \"proto3\"; message A { int32 x = 1; } message B { int32 y = 1; }"),
            Diffs{"MESSAGE_REMOVED at #/B"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message Order { string id = 1; string qty = 2; }",
                  "syntax = \"proto3\"; message Order { string id = 1; int32 qty = 2; }"),
            Diffs{"FIELD_SCALAR_KIND_CHANGED at #/Order/2"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { double x = 1; sint32 y = 2; fixed64 z = 3; }",
                  "syntax = \"proto3\"; message A { float x = 1; int32 y = 2; fixed32 z = 3; }"),
            (Diffs{"FIELD_SCALAR_KIND_CHANGED at #/A/1", "FIELD_SCALAR_KIND_CHANGED at #/A/2",
                   "FIELD_SCALAR_KIND_CHANGED at #/A/3"}));
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { B x = 1; } message B { int32 v = 1; }",
                  "syntax = \"proto3\"; message A { int32 x = 1; } message B { int32 v = 1; }"),
            Diffs{"FIELD_KIND_CHANGED at #/A/1"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { map<string, int32> x = 1; }",
                  "syntax = \"proto3\"; message A { repeated string x = 1; }"),
            Diffs{"FIELD_KIND_CHANGED at #/A/1"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { map<string, string> x = 1; }",
                  "syntax = \"proto3\"; message A { map<string, int32> x = 1; }"),
            Diffs{"FIELD_SCALAR_KIND_CHANGED at #/A/1"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { C x = 1; } message B { int32 v = 1; } message "
                  "C { int32 v = 1; }",
                  "syntax = \"proto3\"; message A { B x = 1; } message B { int32 v = 1; } message "
                  "C { int32 v = 1; }"),
            Diffs{"FIELD_NAMED_TYPE_CHANGED at #/A/1"});
  EXPECT_EQ(Check("syntax = \"proto2\"; message A { repeated int32 x = 1; }",
                  "syntax = \"proto2\"; message A { optional int32 x = 1; }"),
            Diffs{"FIELD_NUMERIC_LABEL_CHANGED at #/A/1"});
  EXPECT_EQ(Check("syntax = \"proto2\"; message A { optional int32 x = 1; required int32 y = 2; }",
                  "syntax = \"proto2\"; message A { optional int32 x = 1; }"),
            Diffs{"REQUIRED_FIELD_ADDED at #/A/2"});
  EXPECT_EQ(Check("syntax = \"proto2\"; message A { optional int32 x = 1; }",
                  "syntax = \"proto2\"; message A { optional int32 x = 1; required int32 y = 2; }"),
            Diffs{"REQUIRED_FIELD_REMOVED at #/A/2"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { oneof o { string a = 1; } }",
                  "syntax = \"proto3\"; message A { oneof o { string a = 1; string b = 2; } }"),
            Diffs{"ONEOF_FIELD_REMOVED at #/A/o/2"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { oneof o { string a = 1; string b = 2; } }",
                  "syntax = \"proto3\"; message A { string a = 1; string b = 2; }"),
            Diffs{"MULTIPLE_FIELDS_MOVED_TO_ONEOF at #/A/o"});
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { oneof o { string a = 1; string b = 2; } }",
                  "syntax = \"proto3\"; message A { oneof o { string a = 1; } string b = 2; }"),
            Diffs{"FIELD_MOVED_TO_EXISTING_ONEOF at #/A/o"});
  // A nested message's field, and a type's change inside an imported file.
  EXPECT_EQ(Check("syntax = \"proto3\"; message A { message In { string v = 1; } In i = 1; }",
                  "syntax = \"proto3\"; message A { message In { int64 v = 1; } In i = 1; }"),
            Diffs{"FIELD_SCALAR_KIND_CHANGED at #/A/In/1"});
  std::vector<Reference> v1 = {
      {"m.proto", "syntax = \"proto3\"; package m; message Money { int64 units = 1; }"}};
  std::vector<Reference> v2 = {
      {"m.proto", "syntax = \"proto3\"; package m; message Money { string units = 1; }"}};
  Parsed w =
      MustParse("syntax = \"proto3\"; import \"m.proto\"; message A { m.Money price = 1; }", v1);
  Parsed r =
      MustParse("syntax = \"proto3\"; import \"m.proto\"; message A { m.Money price = 1; }", v2);
  EXPECT_EQ(Incompatibilities(r, w),
            (Diffs{"FIELD_SCALAR_KIND_CHANGED at #/Money/1", "FIELD_NAMED_TYPE_CHANGED at #/A/1"}));
  // Recursive types terminate.
  EXPECT_EQ(Check("syntax = \"proto3\"; message T { T left = 1; string v = 2; }",
                  "syntax = \"proto3\"; message T { T left = 1; int32 v = 2; }"),
            Diffs{"FIELD_SCALAR_KIND_CHANGED at #/T/2"});
}

}  // namespace
}  // namespace sluice::schema::protobuf
