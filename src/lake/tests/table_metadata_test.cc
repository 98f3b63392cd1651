#include "lake/table_metadata.h"

#include <gtest/gtest.h>

namespace sluice::lake {
namespace table_metadata_test {
namespace {

// A v2 table as Spark writes one (hand-written from the spec's examples): two snapshots,
// partitioned by day(ts) and bucket[16](id), sorted by id, a main branch and a tag.
constexpr const char* kSparkLikeV2 = R"JSON({
  "format-version" : 2,
  "table-uuid" : "fb072c92-a02b-11e9-ae9c-1bb7bc9eca94",
  "location" : "s3://bucket/warehouse/db/events",
  "last-sequence-number" : 2,
  "last-updated-ms" : 1700000100000,
  "last-column-id" : 5,
  "current-schema-id" : 0,
  "schemas" : [ {
    "type" : "struct",
    "schema-id" : 0,
    "identifier-field-ids" : [ 1 ],
    "fields" : [
      { "id" : 1, "name" : "id", "required" : true, "type" : "long" },
      { "id" : 2, "name" : "ts", "required" : false, "type" : "timestamptz" },
      { "id" : 3, "name" : "data", "required" : false, "type" : "string", "doc" : "payload" },
      { "id" : 4, "name" : "tags", "required" : false,
        "type" : { "type" : "list", "element-id" : 5, "element" : "string", "element-required" : false } }
    ]
  } ],
  "default-spec-id" : 0,
  "partition-specs" : [ {
    "spec-id" : 0,
    "fields" : [
      { "name" : "ts_day", "transform" : "day", "source-id" : 2, "field-id" : 1000 },
      { "name" : "id_bucket", "transform" : "bucket[16]", "source-id" : 1, "field-id" : 1001 }
    ]
  } ],
  "last-partition-id" : 1001,
  "default-sort-order-id" : 1,
  "sort-orders" : [
    { "order-id" : 0, "fields" : [ ] },
    { "order-id" : 1, "fields" : [
      { "transform" : "identity", "source-id" : 1, "direction" : "asc", "null-order" : "nulls-first" },
      { "transform" : "bucket[4]", "source-id" : 3, "direction" : "desc", "null-order" : "nulls-last" } ] }
  ],
  "properties" : {
    "write.format.default" : "parquet",
    "commit.retry.num-retries" : "4"
  },
  "current-snapshot-id" : 3055729675574597004,
  "refs" : {
    "main" : { "snapshot-id" : 3055729675574597004, "type" : "branch" },
    "v1" : { "snapshot-id" : 3051729675574597004, "type" : "tag", "max-ref-age-ms" : 10000000 }
  },
  "snapshots" : [ {
    "snapshot-id" : 3051729675574597004,
    "sequence-number" : 1,
    "timestamp-ms" : 1700000000000,
    "summary" : { "operation" : "append", "added-data-files" : "1", "added-records" : "10",
                  "spark.app.id" : "local-1700000000000" },
    "manifest-list" : "s3://bucket/warehouse/db/events/metadata/snap-3051729675574597004-1-a.avro",
    "schema-id" : 0
  }, {
    "snapshot-id" : 3055729675574597004,
    "parent-snapshot-id" : 3051729675574597004,
    "sequence-number" : 2,
    "timestamp-ms" : 1700000100000,
    "summary" : { "operation" : "overwrite", "deleted-data-files" : "1" },
    "manifest-list" : "s3://bucket/warehouse/db/events/metadata/snap-3055729675574597004-1-b.avro",
    "schema-id" : 0
  } ],
  "statistics" : [ ],
  "partition-statistics" : [ ],
  "snapshot-log" : [
    { "timestamp-ms" : 1700000000000, "snapshot-id" : 3051729675574597004 },
    { "timestamp-ms" : 1700000100000, "snapshot-id" : 3055729675574597004 } ],
  "metadata-log" : [
    { "timestamp-ms" : 1699999990000, "metadata-file" : "s3://bucket/warehouse/db/events/metadata/00000-a.metadata.json" },
    { "timestamp-ms" : 1700000000000, "metadata-file" : "s3://bucket/warehouse/db/events/metadata/00001-b.metadata.json" } ]
})JSON";

TableMetadata Parse(std::string_view text) {
  auto m = TableMetadataFromJson(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : TableMetadata{};
}

TEST(TableMetadataTest, ParsesAnEngineWrittenV2Table) {
  TableMetadata m = Parse(kSparkLikeV2);
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.last_sequence_number, 2);
  ASSERT_NE(m.CurrentSchema(), nullptr);
  EXPECT_EQ(m.CurrentSchema()->FindField("tags.element")->id, 5);
  ASSERT_NE(m.DefaultSpec(), nullptr);
  EXPECT_EQ(m.DefaultSpec()->fields[0].transform, Transform::Day());
  EXPECT_EQ(m.DefaultSpec()->fields[1].transform, Transform::Bucket(16));
  EXPECT_EQ(m.FindSortOrder(1)->fields[1].direction, SortDirection::kDesc);
  ASSERT_NE(m.CurrentSnapshot(), nullptr);
  EXPECT_EQ(m.CurrentSnapshot()->operation, "overwrite");
  EXPECT_EQ(m.CurrentSnapshot()->parent_snapshot_id, 3051729675574597004);
  EXPECT_EQ(m.FindSnapshot(3051729675574597004)->summary.at("spark.app.id"), "local-1700000000000");
  EXPECT_EQ(m.FindRef("v1")->type, RefType::kTag);
  EXPECT_EQ(m.FindRef("v1")->max_ref_age_ms, 10000000);
  EXPECT_EQ(m.properties.at("commit.retry.num-retries"), "4");
  EXPECT_EQ(m.snapshot_log.size(), 2u);
  EXPECT_EQ(m.metadata_log[1].timestamp_ms, 1700000000000);
  auto pt = m.DefaultSpec()->PartitionType(*m.CurrentSchema());
  ASSERT_TRUE(pt.ok());
  EXPECT_EQ(pt->ToString(), "struct<1000 ts_day: int, 1001 id_bucket: int>");
}

TEST(TableMetadataTest, ReserializingGivesEquivalentJson) {
  auto original = ParseJson(kSparkLikeV2, "test");
  ASSERT_TRUE(original.ok());
  TableMetadata m = Parse(kSparkLikeV2);
  Json out = TableMetadataToJson(m);
  // Same document: nlohmann's == on ordered_json compares objects with key order, so
  // compare the unordered forms.
  EXPECT_EQ(nlohmann::json::parse(out.dump()), nlohmann::json::parse(original->dump()))
      << out.dump(2);
  // And a second round trip is exact, key order included.
  TableMetadata again = Parse(TableMetadataToString(m));
  EXPECT_EQ(again, m);
  EXPECT_EQ(TableMetadataToString(again), TableMetadataToString(m));
  EXPECT_EQ(out.begin().key(), "format-version");
}

// Applies `edit` to the example's JSON and returns the parse error.
Status ErrorAfter(const std::function<void(Json&)>& edit) {
  auto j = ParseJson(kSparkLikeV2, "test");
  EXPECT_TRUE(j.ok());
  edit(*j);
  auto m = TableMetadataFromJson(*j);
  EXPECT_FALSE(m.ok()) << "parsed: " << j->dump();
  return m.status();
}

void ExpectMessage(const Status& st, std::string_view needle) {
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
}

TEST(TableMetadataTest, MissingRequiredFieldsNameTheirPath) {
  ExpectMessage(ErrorAfter([](Json& j) { j.erase("last-sequence-number"); }),
                "$: missing required field \"last-sequence-number\"");
  ExpectMessage(ErrorAfter([](Json& j) { j.erase("table-uuid"); }), "\"table-uuid\"");
  ExpectMessage(ErrorAfter([](Json& j) { j.erase("sort-orders"); }), "\"sort-orders\"");
  ExpectMessage(ErrorAfter([](Json& j) { j["snapshots"][1].erase("summary"); }),
                "$.snapshots[1]: missing required field \"summary\"");
  ExpectMessage(ErrorAfter([](Json& j) { j["snapshots"][0]["summary"].erase("operation"); }),
                "$.snapshots[0].summary: missing required field \"operation\"");
  ExpectMessage(ErrorAfter([](Json& j) { j["partition-specs"][0]["fields"][1].erase("field-id"); }),
                "$.partition-specs[0].fields[1]: missing required field \"field-id\"");
  ExpectMessage(
      ErrorAfter([](Json& j) { j["schemas"][0]["fields"][3]["type"].erase("element-id"); }),
      "$.schemas[0].fields[3].type: missing required field \"element-id\"");
}

TEST(TableMetadataTest, WrongTypesNameTheirPath) {
  ExpectMessage(ErrorAfter([](Json& j) { j["last-column-id"] = "5"; }),
                "$.last-column-id: expected an integer, got a string");
  ExpectMessage(ErrorAfter([](Json& j) { j["last-updated-ms"] = 1.5; }),
                "$.last-updated-ms: expected an integer, got a non-integer number");
  ExpectMessage(ErrorAfter([](Json& j) { j["properties"]["x"] = 3; }),
                "$.properties.x: expected a string");
  ExpectMessage(ErrorAfter([](Json& j) { j["refs"]["main"]["type"] = "trunk"; }),
                "$.refs.main.type: \"trunk\" is not branch or tag");
  ExpectMessage(ErrorAfter([](Json& j) { j["sort-orders"][1]["fields"][0]["direction"] = "up"; }),
                "$.sort-orders[1].fields[0].direction");
  ExpectMessage(ErrorAfter([](Json& j) { j["last-column-id"] = 4294967296LL; }),
                "does not fit in an int");
  ExpectMessage(ErrorAfter([](Json& j) { j["snapshots"] = Json::object(); }),
                "$.snapshots: expected an array");
  ExpectMessage(
      ErrorAfter([](Json& j) { j["partition-specs"][0]["fields"][0]["transform"] = "bucket[0]"; }),
      "$.partition-specs[0].fields[0].transform");
}

TEST(TableMetadataTest, FutureFormatVersionsAreRejectedClearly) {
  Status st = ErrorAfter([](Json& j) { j["format-version"] = 3; });
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  ExpectMessage(st, "format-version 3 is not supported");
  ExpectMessage(ErrorAfter([](Json& j) { j["format-version"] = 0; }), "format-version 0");
}

TEST(TableMetadataTest, TableLevelRulesAreChecked) {
  ExpectMessage(ErrorAfter([](Json& j) { j["schemas"][0]["fields"][2]["id"] = 1; }),
                "id 1 is used by more than one field");
  ExpectMessage(ErrorAfter([](Json& j) { j["current-snapshot-id"] = 42; }),
                "current-snapshot-id 42 is not among the snapshots");
  ExpectMessage(ErrorAfter([](Json& j) { j["current-snapshot-id"] = 3051729675574597004LL; }),
                "does not match the main branch");
  ExpectMessage(ErrorAfter([](Json& j) { j["refs"]["v1"]["snapshot-id"] = 7; }),
                "ref \"v1\" points at snapshot 7");
  ExpectMessage(ErrorAfter([](Json& j) { j["current-schema-id"] = 9; }), "current-schema-id 9");
  ExpectMessage(ErrorAfter([](Json& j) { j["default-spec-id"] = 9; }), "default-spec-id 9");
  ExpectMessage(ErrorAfter([](Json& j) { j["default-sort-order-id"] = 9; }),
                "default-sort-order-id 9");
  ExpectMessage(ErrorAfter([](Json& j) { j["last-column-id"] = 4; }), "above last-column-id 4");
  ExpectMessage(ErrorAfter([](Json& j) { j["last-partition-id"] = 1000; }),
                "above last-partition-id");
  ExpectMessage(ErrorAfter([](Json& j) { j["last-sequence-number"] = 1; }),
                "above last-sequence-number");
  ExpectMessage(
      ErrorAfter([](Json& j) { j["snapshots"][1]["snapshot-id"] = 3051729675574597004LL; }),
      "appears more than once");
  ExpectMessage(
      ErrorAfter([](Json& j) { j["snapshots"][1]["parent-snapshot-id"] = 3055729675574597004LL; }),
      "is its own parent");
  ExpectMessage(ErrorAfter([](Json& j) { j["partition-specs"][0]["fields"][0]["source-id"] = 3; }),
                "transform day cannot be applied to \"data\" of type string");
  ExpectMessage(ErrorAfter([](Json& j) { j["partition-specs"][0]["fields"][0]["source-id"] = 99; }),
                "source id 99 is not in schema 0");
  ExpectMessage(ErrorAfter([](Json& j) { j["sort-orders"][0]["order-id"] = 2; }),
                "reserved for the unsorted");
  ExpectMessage(ErrorAfter([](Json& j) { j["refs"]["v1"]["min-snapshots-to-keep"] = 2; }),
                "for branches only");
  ExpectMessage(
      ErrorAfter([](Json& j) { j["schemas"][0]["fields"][1]["type"] = "timestamptz_ns"; }),
      "need format v3");
}

TEST(TableMetadataTest, ParentExpiredByExpireSnapshotsIsAccepted) {
  // After expire_snapshots the oldest snapshot left still names its removed parent.
  auto j = ParseJson(kSparkLikeV2, "test");
  ASSERT_TRUE(j.ok());
  (*j)["snapshots"].erase(0);
  (*j)["refs"].erase("v1");
  (*j)["snapshot-log"].erase(0);
  auto m = TableMetadataFromJson(*j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->CurrentSnapshot()->parent_snapshot_id, 3051729675574597004);
}

TEST(TableMetadataTest, NoCurrentSnapshotIsWrittenAsMinusOneAndReadFromNullOrMinusOne) {
  auto j = ParseJson(kSparkLikeV2, "test");
  ASSERT_TRUE(j.ok());
  (*j)["current-snapshot-id"] = nullptr;
  (*j)["refs"] = Json::object();
  auto m = TableMetadataFromJson(*j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->current_snapshot_id);
  EXPECT_EQ(TableMetadataToJson(*m)["current-snapshot-id"], -1);
  (*j)["current-snapshot-id"] = -1;
  EXPECT_TRUE(TableMetadataFromJson(*j).ok());
}

TEST(TableMetadataTest, MissingRefsMeansCurrentSnapshotIsMain) {
  auto j = ParseJson(kSparkLikeV2, "test");
  ASSERT_TRUE(j.ok());
  j->erase("refs");
  auto m = TableMetadataFromJson(*j);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_NE(m->FindRef("main"), nullptr);
  EXPECT_EQ(m->FindRef("main")->snapshot_id, 3055729675574597004);
}

TEST(TableMetadataTest, ReadsV1WithTheSpecsConversions) {
  constexpr const char* kV1 = R"JSON({
    "format-version": 1,
    "location": "/tmp/t",
    "last-updated-ms": 1600000000000,
    "last-column-id": 2,
    "schema": {"type": "struct", "fields": [
      {"id": 1, "name": "a", "required": true, "type": "int"},
      {"id": 2, "name": "b", "required": false, "type": "date"}]},
    "partition-spec": [{"name": "b_month", "transform": "month", "source-id": 2}],
    "current-snapshot-id": 5,
    "snapshots": [{"snapshot-id": 5, "timestamp-ms": 1600000000000,
                   "manifest-list": "/tmp/t/metadata/snap-5.avro"}]
  })JSON";
  TableMetadata m = Parse(kV1);
  EXPECT_EQ(m.format_version, 1);
  EXPECT_EQ(m.last_sequence_number, 0);
  EXPECT_EQ(m.snapshots[0].sequence_number, 0);
  EXPECT_EQ(m.DefaultSpec()->fields[0].field_id, 1000);
  EXPECT_EQ(m.last_partition_id, 1000);
  EXPECT_EQ(m.default_sort_order_id, 0);
  EXPECT_EQ(m.FindRef("main")->snapshot_id, 5);
  Json out = TableMetadataToJson(m);
  EXPECT_FALSE(out.contains("last-sequence-number"));
  EXPECT_TRUE(out.contains("schema"));
  EXPECT_TRUE(out.contains("partition-spec"));
  EXPECT_EQ(Parse(out.dump()), m);

  Json manifests = Json::parse(kV1);
  manifests["snapshots"][0].erase("manifest-list");
  manifests["snapshots"][0]["manifests"] = Json::array({"/tmp/m1.avro"});
  auto st = TableMetadataFromJson(manifests);
  EXPECT_EQ(st.status().code(), StatusCode::kUnimplemented);
}

TEST(TableMetadataTest, NotJsonIsAnError) {
  auto m = TableMetadataFromJson(std::string_view("{\"format-version\": 2,"));
  EXPECT_FALSE(m.ok());
  ExpectMessage(m.status(), "not valid JSON");
  EXPECT_FALSE(TableMetadataFromJson(std::string_view("[]")).ok());
}

Schema ClientSchema() {
  Schema s;
  s.schema_id = 7;
  s.fields = {
      NestedField{10, "id", true, Type::Primitive(TypeId::kLong), {}},
      NestedField{11, "ts", false, Type::Primitive(TypeId::kTimestampTz), {}},
      NestedField{12,
                  "point",
                  false,
                  Type::Struct({NestedField{20, "x", true, Type::Primitive(TypeId::kDouble), {}},
                                NestedField{21, "y", true, Type::Primitive(TypeId::kDouble), {}}}),
                  {}},
      NestedField{13, "name", false, Type::Primitive(TypeId::kString), {}}};
  s.identifier_field_ids = {10};
  return s;
}

TEST(NewTableTest, AssignsFreshIdsLikeTheRestCatalog) {
  NewTableOptions o;
  o.location = "s3://b/t/";
  o.schema = ClientSchema();
  o.spec.fields = {PartitionField{11, 0, "ts_day", Transform::Day()},
                   PartitionField{10, 0, "id_bucket", Transform::Bucket(8)}};
  o.sort_order.fields = {
      SortField{Transform::Identity(), 13, SortDirection::kAsc, NullOrder::kNullsFirst}};
  o.properties = {{"owner", "sluice"}};
  o.table_uuid = "d0c7e4a5-0000-4000-8000-000000000001";
  o.now_ms = 1234;
  auto m = NewTable(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Schema& s = *m->CurrentSchema();
  EXPECT_EQ(s.schema_id, 0);
  EXPECT_EQ(s.FindField("id")->id, 1);
  EXPECT_EQ(s.FindField("name")->id, 4);
  EXPECT_EQ(s.FindField("point.x")->id, 5);
  EXPECT_EQ(s.FindField("point.y")->id, 6);
  EXPECT_EQ(s.identifier_field_ids, std::vector<int32_t>{1});
  EXPECT_EQ(m->last_column_id, 6);
  EXPECT_EQ(m->DefaultSpec()->fields[0].source_id, 2);
  EXPECT_EQ(m->DefaultSpec()->fields[0].field_id, 1000);
  EXPECT_EQ(m->DefaultSpec()->fields[1].source_id, 1);
  EXPECT_EQ(m->DefaultSpec()->fields[1].field_id, 1001);
  EXPECT_EQ(m->last_partition_id, 1001);
  EXPECT_EQ(m->default_sort_order_id, 1);
  EXPECT_EQ(m->FindSortOrder(1)->fields[0].source_id, 4);
  EXPECT_EQ(m->location, "s3://b/t");
  EXPECT_EQ(m->last_updated_ms, 1234);
  EXPECT_EQ(m->last_sequence_number, 0);
  EXPECT_FALSE(m->current_snapshot_id);
  // What we write, we read back.
  EXPECT_EQ(Parse(TableMetadataToString(*m)), *m);
}

TEST(NewTableTest, UnpartitionedUnsortedDefaults) {
  NewTableOptions o;
  o.location = "/tmp/t";
  o.schema = ClientSchema();
  auto m = NewTable(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->last_partition_id, 999);
  EXPECT_EQ(m->default_sort_order_id, 0);
  EXPECT_EQ(m->table_uuid.size(), 36u);
  EXPECT_TRUE(ParseUuid(m->table_uuid).ok());
}

TEST(NewTableTest, RejectsBadSpecs) {
  NewTableOptions o;
  o.location = "/tmp/t";
  o.schema = ClientSchema();
  o.spec.fields = {PartitionField{13, 0, "n", Transform::Day()}};
  EXPECT_FALSE(NewTable(o).ok());  // day of a string
  o.spec.fields = {PartitionField{99, 0, "n", Transform::Identity()}};
  EXPECT_FALSE(NewTable(o).ok());  // no such column
  o.spec.fields = {PartitionField{10, 0, "name", Transform::Bucket(2)}};
  EXPECT_FALSE(NewTable(o).ok());  // shadows another column
  o.spec.fields = {PartitionField{13, 0, "name", Transform::Identity()}};
  EXPECT_TRUE(NewTable(o).ok());  // identity of the same column may keep its name
  o.spec.fields = {PartitionField{20, 0, "px", Transform::Identity()}};
  EXPECT_TRUE(NewTable(o).ok());  // nested in a struct is fine
  o.format_version = 3;
  EXPECT_EQ(NewTable(o).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace table_metadata_test
}  // namespace sluice::lake
