#include "lake/iceberg_schema.h"

#include <gtest/gtest.h>

namespace sluice::lake {
namespace iceberg_schema_test {
namespace {

// The spec's Appendix C examples, put together into one schema.
constexpr const char* kSchemaJson = R"JSON({
  "type": "struct",
  "schema-id": 3,
  "identifier-field-ids": [1],
  "fields": [
    {"id": 1, "name": "id", "required": true, "type": "uuid", "doc": "row id"},
    {"id": 2, "name": "data", "required": false,
     "type": {"type": "list", "element-id": 3, "element": "string", "element-required": true}},
    {"id": 4, "name": "props", "required": false,
     "type": {"type": "map", "key-id": 5, "key": "string", "value-id": 6, "value": "double",
              "value-required": false}},
    {"id": 7, "name": "loc", "required": false,
     "type": {"type": "struct", "fields": [
       {"id": 8, "name": "lat", "required": true, "type": "decimal(9, 2)"},
       {"id": 9, "name": "raw", "required": false, "type": "fixed[16]"}]}},
    {"id": 10, "name": "ts", "required": true, "type": "timestamptz"}
  ]
})JSON";

Schema Parse(std::string_view text) {
  auto j = ParseJson(text, "test");
  EXPECT_TRUE(j.ok());
  auto s = SchemaFromJson(*j, "$", true);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Schema{};
}

TEST(IcebergSchemaTest, ParsesSpecExampleTypes) {
  Schema s = Parse(kSchemaJson);
  EXPECT_TRUE(s.Validate().ok()) << s.Validate().ToString();
  EXPECT_EQ(s.schema_id, 3);
  ASSERT_EQ(s.fields.size(), 5u);
  EXPECT_EQ(s.fields[0].type.id, TypeId::kUuid);
  EXPECT_EQ(s.fields[0].doc, "row id");
  EXPECT_EQ(s.fields[1].type.ToString(), "list<string>");
  EXPECT_EQ(s.fields[2].type.value().type.id, TypeId::kDouble);
  EXPECT_FALSE(s.fields[2].type.value().required);
  EXPECT_EQ(s.FindField(8)->type, Type::Decimal(9, 2));
  EXPECT_EQ(s.FindField(9)->type, Type::Fixed(16));
  EXPECT_EQ(s.HighestFieldId(), 10);
}

TEST(IcebergSchemaTest, LookupsByIdAndName) {
  Schema s = Parse(kSchemaJson);
  EXPECT_EQ(s.FindField("loc.lat")->id, 8);
  EXPECT_EQ(s.FindField("data.element")->id, 3);
  EXPECT_EQ(s.FindField("props.key")->id, 5);
  EXPECT_EQ(s.FindField("props.value")->id, 6);
  EXPECT_EQ(s.FindField("nope"), nullptr);
  EXPECT_EQ(s.FindField(99), nullptr);
  EXPECT_EQ(s.FindName(9), "loc.raw");
}

TEST(IcebergSchemaTest, SerializesToWhatItParsed) {
  Schema s = Parse(kSchemaJson);
  Json out = SchemaToJson(s);
  EXPECT_EQ(out["fields"][3]["type"]["fields"][0]["type"], "decimal(9,2)");  // canonical form
  Schema again = Parse(out.dump());
  EXPECT_EQ(again, s);
  auto expected = ParseJson(kSchemaJson, "x");
  (*expected)["fields"][3]["type"]["fields"][0]["type"] = "decimal(9,2)";
  EXPECT_EQ(out, *expected);
}

TEST(IcebergSchemaTest, PrimitiveTypeStrings) {
  EXPECT_TRUE(PrimitiveTypeFromString("decimal(38,0)").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("decimal(39,0)").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("decimal(5,6)").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("decimal(5)").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("fixed[0]").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("fixed[]").ok());
  EXPECT_FALSE(PrimitiveTypeFromString("Int").ok());
  EXPECT_EQ(PrimitiveTypeFromString("variant").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(PrimitiveTypeFromString("timestamp_ns")->id, TypeId::kTimestampNs);
}

Status ParseError(std::string_view text) {
  auto j = ParseJson(text, "test");
  if (!j.ok()) return j.status();
  auto s = SchemaFromJson(*j, "$.schemas[0]", true);
  if (!s.ok()) return s.status();
  return s->Validate();
}

TEST(IcebergSchemaTest, MalformedSchemasNameThePath) {
  Status st = ParseError(R"({"type":"struct","fields":[]})");
  EXPECT_NE(st.message().find("$.schemas[0]: missing required field \"schema-id\""),
            std::string::npos)
      << st.message();
  st = ParseError(
      R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"a","required":"yes","type":"int"}]})");
  EXPECT_NE(st.message().find("$.schemas[0].fields[0].required: expected a boolean, got a string"),
            std::string::npos)
      << st.message();
  st = ParseError(
      R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"a","required":true,"type":"integer"}]})");
  EXPECT_NE(st.message().find("$.schemas[0].fields[0].type"), std::string::npos) << st.message();
  st = ParseError(
      R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"a","required":true,"type":{"type":"list","element-id":2,"element":"int"}}]})");
  EXPECT_NE(st.message().find("element-required"), std::string::npos) << st.message();
}

TEST(IcebergSchemaTest, DuplicateIdsAndNamesAreInvalid) {
  Status st = ParseError(R"({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"a","required":true,"type":"int"},
      {"id":2,"name":"b","required":true,"type":{"type":"list","element-id":1,"element":"int","element-required":true}}]})");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("id 1 is used by more than one field"), std::string::npos)
      << st.message();
  st = ParseError(R"({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"a","required":true,"type":"int"},{"id":2,"name":"a","required":true,"type":"int"}]})");
  EXPECT_NE(st.message().find("appears twice"), std::string::npos) << st.message();
  // The same name in different structs is fine.
  st = ParseError(R"({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"a","required":true,"type":"int"},
      {"id":2,"name":"s","required":true,"type":{"type":"struct","fields":[{"id":3,"name":"a","required":true,"type":"int"}]}}]})");
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(IcebergSchemaTest, IdentifierFieldRules) {
  auto with_ids = [](std::string ids, std::string fields) {
    return ParseError(R"({"type":"struct","schema-id":0,"identifier-field-ids":)" + ids +
                      R"(,"fields":)" + fields + "}");
  };
  std::string fields = R"([{"id":1,"name":"a","required":true,"type":"long"},
      {"id":2,"name":"f","required":true,"type":"double"},
      {"id":3,"name":"o","required":false,"type":"int"},
      {"id":4,"name":"s","required":false,"type":{"type":"struct","fields":[{"id":5,"name":"x","required":true,"type":"int"}]}},
      {"id":6,"name":"l","required":true,"type":{"type":"list","element-id":7,"element":"int","element-required":true}}])";
  EXPECT_TRUE(with_ids("[1]", fields).ok());
  EXPECT_FALSE(with_ids("[2]", fields).ok());   // double
  EXPECT_FALSE(with_ids("[3]", fields).ok());   // optional
  EXPECT_FALSE(with_ids("[5]", fields).ok());   // inside an optional struct
  EXPECT_FALSE(with_ids("[7]", fields).ok());   // inside a list
  EXPECT_FALSE(with_ids("[42]", fields).ok());  // missing
  EXPECT_FALSE(with_ids("[1,1]", fields).ok());
}

TEST(IcebergSchemaTest, AssignFreshIdsVisitsStructFieldsBeforeChildren) {
  Schema s = Parse(kSchemaJson);
  for (NestedField& f : s.fields) f.id += 100;  // ids a client might send
  s.fields[1].type.fields[0].id = 500;
  s.identifier_field_ids = {101};
  int32_t next = 1;
  Schema fresh = AssignFreshIds(s, &next);
  // Top-level fields 1..5, then data.element, props.key/value, loc.lat/raw.
  EXPECT_EQ(fresh.FindField("id")->id, 1);
  EXPECT_EQ(fresh.FindField("ts")->id, 5);
  EXPECT_EQ(fresh.FindField("data.element")->id, 6);
  EXPECT_EQ(fresh.FindField("props.key")->id, 7);
  EXPECT_EQ(fresh.FindField("props.value")->id, 8);
  EXPECT_EQ(fresh.FindField("loc.lat")->id, 9);
  EXPECT_EQ(fresh.FindField("loc.raw")->id, 10);
  EXPECT_EQ(next, 11);
  EXPECT_EQ(fresh.identifier_field_ids, std::vector<int32_t>{1});
}

TEST(IcebergSchemaTest, HostileNestingIsBounded) {
  std::string deep;
  for (int i = 0; i < 1000; ++i)
    deep += R"({"type":"list","element-id":1,"element-required":true,"element":)";
  deep += "\"int\"";
  for (int i = 0; i < 1000; ++i) deep += "}";
  auto j = ParseJson(deep, "deep");
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(TypeFromJson(*j, "$").ok());
}

}  // namespace
}  // namespace iceberg_schema_test
}  // namespace sluice::lake
