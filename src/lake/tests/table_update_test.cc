#include "lake/table_update.h"

#include <gtest/gtest.h>

namespace sluice::lake {
namespace table_update_test {
namespace {

// What a REST client (Java's RESTSessionCatalog, PyIceberg) sends to create a table in a
// transaction.
constexpr const char* kCreate = R"JSON({
  "identifier": {"namespace": ["db"], "name": "events"},
  "requirements": [{"type": "assert-create"}],
  "updates": [
    {"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
    {"action": "upgrade-format-version", "format-version": 2},
    {"action": "add-schema", "last-column-id": 3, "schema": {"type": "struct", "schema-id": 0,
      "fields": [{"id": 1, "name": "id", "required": true, "type": "long"},
                 {"id": 2, "name": "ts", "required": false, "type": "timestamptz"},
                 {"id": 3, "name": "data", "required": false, "type": "string"}]}},
    {"action": "set-current-schema", "schema-id": -1},
    {"action": "add-spec", "spec": {"spec-id": 0, "fields": [
      {"name": "ts_day", "transform": "day", "source-id": 2, "field-id": 1000}]}},
    {"action": "set-default-spec", "spec-id": -1},
    {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
    {"action": "set-default-sort-order", "sort-order-id": -1},
    {"action": "set-location", "location": "s3://b/wh/db/events"},
    {"action": "set-properties", "updates": {"write.format.default": "parquet"}}
  ]
})JSON";

constexpr int64_t kNow = 1700000000000;

TableMetadata Created() {
  auto req = CommitRequestFromJson(std::string_view(kCreate));
  EXPECT_TRUE(req.ok()) << req.status().ToString();
  auto m = CommitTable(nullptr, "", *req, kNow);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : TableMetadata{};
}

CommitRequest Request(std::string_view json) {
  auto r = CommitRequestFromJson(json);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : CommitRequest{};
}

std::string AppendJson(int64_t id, std::optional<int64_t> parent, int64_t seq, int64_t ts,
                       std::optional<int64_t> expected_main) {
  std::string parent_field = parent ? fmt::format(R"("parent-snapshot-id": {},)", *parent) : "";
  std::string expected = expected_main ? std::to_string(*expected_main) : "null";
  return fmt::format(R"JSON({{
    "requirements": [{{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": {}}}],
    "updates": [
      {{"action": "add-snapshot", "snapshot": {{"snapshot-id": {}, {} "sequence-number": {},
        "timestamp-ms": {}, "manifest-list": "s3://b/wh/db/events/metadata/snap-{}.avro",
        "summary": {{"operation": "append", "added-records": "10"}}, "schema-id": 0}}}},
      {{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": {}}}
    ]}})JSON",
                     expected, id, parent_field, seq, ts, id, id);
}

TEST(TableUpdateTest, CreateTransactionBuildsTheTable) {
  TableMetadata m = Created();
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.table_uuid, "9c12d441-03fe-4693-9a96-a0705ddf69c1");
  EXPECT_EQ(m.location, "s3://b/wh/db/events");
  EXPECT_EQ(m.current_schema_id, 0);
  EXPECT_EQ(m.last_column_id, 3);
  EXPECT_EQ(m.default_spec_id, 0);
  EXPECT_EQ(m.last_partition_id, 1000);
  EXPECT_EQ(m.default_sort_order_id, 0);
  EXPECT_EQ(m.last_updated_ms, kNow);
  EXPECT_TRUE(m.metadata_log.empty());
  EXPECT_EQ(m.properties.at("write.format.default"), "parquet");
  EXPECT_TRUE(m.Validate().ok());
}

TEST(TableUpdateTest, CreateFailsWhenTheTableExists) {
  TableMetadata m = Created();
  auto again = CommitTable(&m, "s3://x/v1.json", Request(kCreate), kNow);
  EXPECT_TRUE(IsCommitConflict(again.status())) << again.status().ToString();
}

TEST(TableUpdateTest, AppendsInSequenceWithRequirementFailures) {
  TableMetadata v1 = Created();
  // First append: main must not exist yet.
  auto v2 =
      CommitTable(&v1, "s3://b/wh/db/events/metadata/00000.metadata.json",
                  Request(AppendJson(101, std::nullopt, 1, kNow + 10, std::nullopt)), kNow + 20);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->current_snapshot_id, 101);
  EXPECT_EQ(v2->last_sequence_number, 1);
  EXPECT_EQ(v2->last_updated_ms, kNow + 10);  // the snapshot's timestamp, as Java does
  ASSERT_EQ(v2->snapshot_log.size(), 1u);
  EXPECT_EQ(v2->snapshot_log[0], (SnapshotLogEntry{kNow + 10, 101}));
  ASSERT_EQ(v2->metadata_log.size(), 1u);
  EXPECT_EQ(v2->metadata_log[0],
            (MetadataLogEntry{kNow, "s3://b/wh/db/events/metadata/00000.metadata.json"}));

  // A second writer that still thinks main does not exist conflicts (409).
  auto stale = CommitTable(
      &*v2, "m1", Request(AppendJson(102, std::nullopt, 2, kNow + 30, std::nullopt)), kNow);
  EXPECT_TRUE(IsCommitConflict(stale.status())) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("branch main was created concurrently"),
            std::string::npos);

  // One that expects the wrong snapshot conflicts too.
  auto wrong = CommitTable(&*v2, "m1", Request(AppendJson(102, 101, 2, kNow + 30, 99)), kNow);
  EXPECT_TRUE(IsCommitConflict(wrong.status()));
  EXPECT_NE(wrong.status().message().find("expected id 99 != 101"), std::string::npos)
      << wrong.status().message();

  // A reused sequence number conflicts: another commit took it.
  auto old_seq = CommitTable(&*v2, "m1", Request(AppendJson(102, 101, 1, kNow + 30, 101)), kNow);
  EXPECT_TRUE(IsCommitConflict(old_seq.status())) << old_seq.status().ToString();

  // The right one succeeds.
  auto v3 = CommitTable(&*v2, "m1", Request(AppendJson(102, 101, 2, kNow + 30, 101)), kNow + 40);
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  EXPECT_EQ(v3->current_snapshot_id, 102);
  EXPECT_EQ(v3->snapshot_log.size(), 2u);
  EXPECT_EQ(v3->metadata_log.size(), 2u);
  EXPECT_EQ(v3->FindRef("main")->snapshot_id, 102);

  // Tag the first snapshot, then expire it: the tag goes, and the log before it too.
  auto v4 = ApplyUpdates(*v3, "m2",
                         {SetSnapshotRefUpdate{"t1", SnapshotRef{101, RefType::kTag, {}, {}, {}}}},
                         kNow + 50);
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ(v4->FindRef("t1")->snapshot_id, 101);
  EXPECT_EQ(v4->last_updated_ms, kNow + 50);
  auto v5 = ApplyUpdates(*v4, "m3", {RemoveSnapshotsUpdate{{101}}}, kNow + 60);
  ASSERT_TRUE(v5.ok()) << v5.status().ToString();
  EXPECT_EQ(v5->FindRef("t1"), nullptr);
  EXPECT_EQ(v5->snapshots.size(), 1u);
  ASSERT_EQ(v5->snapshot_log.size(), 1u);
  EXPECT_EQ(v5->snapshot_log[0].snapshot_id, 102);
  // The remaining snapshot's parent is gone, and that is valid metadata.
  auto reread = TableMetadataFromJson(TableMetadataToString(*v5));
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  EXPECT_EQ(*reread, *v5);
}

TEST(TableUpdateTest, IntermediateSnapshotsOfOneCommitAreNotLogged) {
  TableMetadata m = Created();
  Snapshot a{201, std::nullopt, 1, kNow + 1, "s3://a.avro", "append", {}, 0};
  Snapshot b{202, 201, 2, kNow + 2, "s3://b.avro", "append", {}, 0};
  auto out = ApplyUpdates(m, "",
                          {AddSnapshotUpdate{a}, SetSnapshotRefUpdate{"main", {201}},
                           AddSnapshotUpdate{b}, SetSnapshotRefUpdate{"main", {202}}},
                          kNow + 5);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->snapshot_log.size(), 1u);
  EXPECT_EQ(out->snapshot_log[0].snapshot_id, 202);
  EXPECT_EQ(out->last_sequence_number, 2);
}

TEST(TableUpdateTest, SchemaEvolution) {
  TableMetadata m = Created();
  auto r = CommitTable(&m, "m0", Request(R"JSON({"requirements": [
      {"type": "assert-current-schema-id", "current-schema-id": 0},
      {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 3}],
    "updates": [{"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "required": true, "type": "long"},
        {"id": 2, "name": "ts", "required": false, "type": "timestamptz"},
        {"id": 3, "name": "data", "required": false, "type": "string"},
        {"id": 4, "name": "extra", "required": false, "type": "decimal(10, 2)"}]}},
      {"action": "set-current-schema", "schema-id": -1}]})JSON"),
                       kNow + 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->current_schema_id, 1);
  EXPECT_EQ(r->last_column_id, 4);
  EXPECT_EQ(r->schemas.size(), 2u);
  // Re-sending the same requirements now fails: the schema moved on.
  auto again = CommitTable(&*r, "m1", Request(R"JSON({"requirements": [
      {"type": "assert-current-schema-id", "current-schema-id": 0}], "updates": []})JSON"),
                           kNow);
  EXPECT_TRUE(IsCommitConflict(again.status()));
  // Adding a schema equal to an existing one reuses its id.
  AddSchemaUpdate same{*m.FindSchema(0), std::nullopt};
  auto reuse = ApplyUpdates(*r, "m1", {same, SetCurrentSchemaUpdate{-1}}, kNow + 2);
  ASSERT_TRUE(reuse.ok()) << reuse.status().ToString();
  EXPECT_EQ(reuse->current_schema_id, 0);
  EXPECT_EQ(reuse->schemas.size(), 2u);
  // last-column-id cannot go backwards.
  auto back = ApplyUpdates(*r, "m1", {AddSchemaUpdate{*m.FindSchema(0), 2}}, kNow);
  EXPECT_EQ(back.status().code(), StatusCode::kInvalidArgument);
}

TEST(TableUpdateTest, PartitionEvolutionAssignsAndReusesFieldIds) {
  TableMetadata m = Created();
  auto r = CommitTable(&m, "m0", Request(R"JSON({"requirements": [
      {"type": "assert-default-spec-id", "default-spec-id": 0},
      {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000}],
    "updates": [{"action": "add-spec", "spec": {"fields": [
        {"name": "ts_day", "transform": "day", "source-id": 2},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1}]}},
      {"action": "set-default-spec", "spec-id": -1}]})JSON"),
                       kNow + 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->default_spec_id, 1);
  EXPECT_EQ(r->DefaultSpec()->fields[0].field_id, 1000);  // reused: same source and transform
  EXPECT_EQ(r->DefaultSpec()->fields[1].field_id, 1001);
  EXPECT_EQ(r->last_partition_id, 1001);
  auto bad = ApplyUpdates(
      m, "m0", {AddSpecUpdate{PartitionSpec{-1, {PartitionField{3, -1, "x", Transform::Hour()}}}}},
      kNow);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(TableUpdateTest, SortOrderEvolution) {
  TableMetadata m = Created();
  SortOrder by_id{
      -1, {SortField{Transform::Identity(), 1, SortDirection::kDesc, NullOrder::kNullsLast}}};
  auto r =
      ApplyUpdates(m, "m0", {AddSortOrderUpdate{by_id}, SetDefaultSortOrderUpdate{-1}}, kNow + 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->default_sort_order_id, 1);
  auto again = ApplyUpdates(*r, "m1", {AddSortOrderUpdate{by_id}}, kNow + 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sort_orders.size(), 2u);
  EXPECT_EQ(CheckRequirement(
                TableRequirement{RequirementKind::kAssertDefaultSortOrderId, "", "", {}, 0}, &*r)
                .code(),
            StatusCode::kFailedPrecondition);
}

TEST(TableUpdateTest, PropertiesLocationAndNoOps) {
  TableMetadata m = Created();
  auto r = ApplyUpdates(m, "m0",
                        {SetPropertiesUpdate{{{"a", "1"}, {"b", "2"}}},
                         RemovePropertiesUpdate{{"a", "zz"}}, SetLocationUpdate{"s3://new/place"}},
                        kNow + 7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->properties.count("a"), 0u);
  EXPECT_EQ(r->properties.at("b"), "2");
  EXPECT_EQ(r->location, "s3://new/place");
  EXPECT_EQ(r->last_updated_ms, kNow + 7);
  // Nothing changes: the same metadata back, no metadata-log entry.
  auto same = ApplyUpdates(
      *r, "m1", {SetCurrentSchemaUpdate{0}, SetLocationUpdate{"s3://new/place"}}, kNow + 9);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, *r);
}

TEST(TableUpdateTest, MetadataLogIsTrimmed) {
  TableMetadata m = Created();
  m.properties[std::string(kMetadataPreviousVersionsMax)] = "2";
  for (int i = 0; i < 5; ++i) {
    auto next = ApplyUpdates(m, fmt::format("m{}", i),
                             {SetPropertiesUpdate{{{"i", std::to_string(i)}}}}, kNow + i + 1);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    m = *next;
  }
  ASSERT_EQ(m.metadata_log.size(), 2u);
  EXPECT_EQ(m.metadata_log[0].metadata_file, "m3");
  EXPECT_EQ(m.metadata_log[1].metadata_file, "m4");
}

TEST(TableUpdateTest, InvalidUpdatesAreBadRequestsNotConflicts) {
  TableMetadata m = Created();
  auto expect_400 = [&](std::vector<TableUpdate> updates, std::string_view needle) {
    auto r = ApplyUpdates(m, "m0", updates, kNow);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_400({SetCurrentSchemaUpdate{5}}, "unknown schema id 5");
  expect_400({SetCurrentSchemaUpdate{-1}}, "no schema was added");
  expect_400({SetDefaultSpecUpdate{3}}, "unknown spec id 3");
  expect_400({SetSnapshotRefUpdate{"main", {999}}}, "unknown snapshot 999");
  expect_400({AssignUuidUpdate{"00000000-0000-4000-8000-000000000000"}}, "cannot be reassigned");
  expect_400({UpgradeFormatVersionUpdate{1}}, "cannot downgrade");
  Snapshot orphan{301, 300, 1, kNow, "s3://x.avro", "append", {}, std::nullopt};
  expect_400({AddSnapshotUpdate{orphan}}, "parent 300, which is not in the table");
  Snapshot ok{301, std::nullopt, 1, kNow, "s3://x.avro", "append", {}, std::nullopt};
  expect_400({AddSnapshotUpdate{ok}, AddSnapshotUpdate{ok}}, "already exists");
  auto v3 = ApplyUpdates(m, "m0", {UpgradeFormatVersionUpdate{3}}, kNow);
  EXPECT_EQ(v3.status().code(), StatusCode::kUnimplemented);
}

TEST(TableUpdateTest, WireFormParsingErrors) {
  auto err = [](std::string_view json) {
    auto r = CommitRequestFromJson(json);
    EXPECT_FALSE(r.ok()) << json;
    return r.status();
  };
  EXPECT_NE(err(R"({"requirements": [], "updates": [{"action": "fly"}]})")
                .message()
                .find("$.updates[0].action: unknown update action \"fly\""),
            std::string::npos);
  Status st =
      err(R"({"requirements": [], "updates": [{"action": "set-statistics", "statistics": {}}]})");
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_NE(err(R"({"requirements": [{"type": "assert-current-schema-id"}], "updates": []})")
                .message()
                .find("$.requirements[0]: missing required field \"current-schema-id\""),
            std::string::npos);
  EXPECT_NE(
      err(R"({"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {"snapshot-id": 1,
      "timestamp-ms": 1, "manifest-list": "x"}}]})")
          .message()
          .find("summary"),
      std::string::npos);
  EXPECT_FALSE(CommitRequestFromJson(std::string_view(R"({"updates": []})")).ok());
  EXPECT_FALSE(CommitRequestFromJson(std::string_view("nope")).ok());
}

TEST(TableUpdateTest, WireFormRoundTrips) {
  CommitRequest req = Request(kCreate);
  req.requirements.push_back(
      TableRequirement{RequirementKind::kAssertRefSnapshotId, "", "main", 5, 0});
  req.updates.push_back(RemoveSnapshotsUpdate{{1, 2}});
  req.updates.push_back(RemoveSnapshotRefUpdate{"t"});
  req.updates.push_back(RemovePropertiesUpdate{{"a"}});
  req.updates.push_back(SetSnapshotRefUpdate{"b", SnapshotRef{5, RefType::kBranch, 3, 1000, 2000}});
  Json j = CommitRequestToJson(req);
  auto back = CommitRequestFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CommitRequestToJson(*back), j);
  EXPECT_EQ(j["updates"][0]["action"], "assign-uuid");
  EXPECT_EQ(j["updates"].back()["min-snapshots-to-keep"], 3);
}

}  // namespace
}  // namespace table_update_test
}  // namespace sluice::lake
