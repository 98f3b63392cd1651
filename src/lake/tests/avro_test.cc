// Tests of the Avro module: schemas, the binary encoding, object container files, bad
// bytes, and interoperability with Python's avro package (an independent implementation).
#include "lake/avro.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "lake/avro_decoder.h"
#include "lake/tests/scratch_dirs.h"

namespace sluice::lake::avro {
namespace avro_test {
namespace {

using Json = nlohmann::json;

// An Iceberg v2 manifest entry, trimmed: field-ids on fields, an element-id on a list,
// int-keyed maps as arrays of key/value records with logicalType map, bytes bounds.
constexpr std::string_view kManifestSchema = R"({
  "type": "record", "name": "manifest_entry", "fields": [
    {"name": "status", "type": "int", "field-id": 0},
    {"name": "snapshot_id", "type": ["null", "long"], "default": null, "field-id": 1},
    {"name": "sequence_number", "type": ["null", "long"], "default": null, "field-id": 3},
    {"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
      {"name": "content", "type": "int", "doc": "Contents of the file", "field-id": 134},
      {"name": "file_path", "type": "string", "doc": "Location URI with FS scheme", "field-id": 100},
      {"name": "file_format", "type": "string", "field-id": 101},
      {"name": "partition", "field-id": 102, "type": {"type": "record", "name": "r102", "fields": [
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": null, "field-id": 1000}]}},
      {"name": "record_count", "type": "long", "field-id": 103},
      {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
      {"name": "column_sizes", "default": null, "field-id": 108, "type": ["null", {"type": "array",
        "logicalType": "map", "items": {"type": "record", "name": "k117_v118", "fields": [
          {"name": "key", "type": "int", "field-id": 117}, {"name": "value", "type": "long", "field-id": 118}]}}]},
      {"name": "lower_bounds", "default": null, "field-id": 125, "type": ["null", {"type": "array",
        "logicalType": "map", "items": {"type": "record", "name": "k126_v127", "fields": [
          {"name": "key", "type": "int", "field-id": 126}, {"name": "value", "type": "bytes", "field-id": 127}]}}]},
      {"name": "split_offsets", "default": null, "field-id": 132,
       "type": ["null", {"type": "array", "items": "long", "element-id": 133}]},
      {"name": "sort_order_id", "type": ["null", "int"], "default": null, "field-id": 140}]}}]})";

// Every Avro type, for both directions of the Python interop test.
constexpr std::string_view kEverySchema = R"({
  "type": "record", "name": "every", "namespace": "sluice.test", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "e", "type": {"type": "enum", "name": "abc", "symbols": ["A", "B", "C"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "four", "size": 4}},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "int"}},
    {"name": "u", "type": ["null", "string"]},
    {"name": "n", "type": "null"},
    {"name": "r", "type": {"type": "record", "name": "inner", "fields": [{"name": "x", "type": "long"}]}}]})";

Schema MustParse(std::string_view json) {
  auto s = Schema::Parse(json);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

Datum ManifestEntry(int64_t i) {
  std::vector<Datum> sizes, bounds;
  for (int32_t k = 1; k <= 3; ++k) {
    sizes.push_back(Datum::Record({{"key", Datum::Int(k)}, {"value", Datum::Long(100 * k + i)}}));
    bounds.push_back(Datum::Record(
        {{"key", Datum::Int(k)}, {"value", Datum::Bytes(std::string("\x00\xff", 2) + char(k))}}));
  }
  Datum data_file = Datum::Record({
      {"content", Datum::Int(0)},
      {"file_path", Datum::String(fmt::format("s3://bucket/t/data/{:05}.parquet", i))},
      {"file_format", Datum::String("PARQUET")},
      {"partition", Datum::Record({{"day", i % 2 ? Datum::Null()
                                                 : Datum::Int(19000 + static_cast<int32_t>(i))}})},
      {"record_count", Datum::Long(i * 1000)},
      {"file_size_in_bytes", Datum::Long(4096 + i)},
      {"column_sizes", Datum::Array(std::move(sizes))},
      {"lower_bounds", Datum::Array(std::move(bounds))},
      {"split_offsets", Datum::Array({Datum::Long(4), Datum::Long(1 << 20)})},
  });
  // sequence_number and sort_order_id are left out: their defaults (null) fill them.
  return Datum::Record({{"status", Datum::Int(1)},
                        {"snapshot_id", Datum::Long(8744736658442914487)},
                        {"data_file", std::move(data_file)}});
}

// The same formula as kPythonScript's every(i).
Datum Every(int64_t i) {
  std::vector<Datum> a;
  for (int64_t k = 0; k < i % 4; ++k) a.push_back(Datum::Long(k));
  std::vector<std::pair<std::string, Datum>> m;
  for (int32_t k = 0; k < i % 3; ++k) m.emplace_back(fmt::format("k{}", k), Datum::Int(k));
  std::string fx(4, '\0');
  for (int k = 0; k < 4; ++k) fx[3 - k] = static_cast<char>((i >> (8 * k)) & 0xFF);
  return Datum::Record({
      {"b", Datum::Boolean(i % 2 == 0)},
      {"i", Datum::Int(static_cast<int32_t>(i - 500))},
      {"l", Datum::Long(i * 1000000007 - (int64_t{1} << 40))},
      {"f", Datum::Float(static_cast<float>(i) + 0.5f)},
      {"d", Datum::Double(static_cast<double>(i) / 4.0)},
      {"s", Datum::String(fmt::format("str-{}-\xc3\xa9", i))},
      {"by", Datum::Bytes(std::string{static_cast<char>(i % 256), '\0', '\xff'})},
      {"e", Datum::Enum(std::string(1, static_cast<char>('A' + i % 3)))},
      {"fx", Datum::Fixed(fx)},
      {"a", Datum::Array(std::move(a))},
      {"m", Datum::Map(std::move(m))},
      {"u", i % 2 ? Datum::Null() : Datum::String(fmt::format("u{}", i))},
      {"n", Datum::Null()},
      {"r", Datum::Record({{"x", Datum::Long(-i)}})},
  });
}

// The datum as the Python script prints a record: bytes as {"$b": hex}.
Json ToJson(const Datum& d) {
  switch (d.kind()) {
    case Datum::Kind::kNull:
      return nullptr;
    case Datum::Kind::kBoolean:
      return d.boolean();
    case Datum::Kind::kInt:
      return d.int_value();
    case Datum::Kind::kLong:
      return d.long_value();
    case Datum::Kind::kFloat:
      return static_cast<double>(d.float_value());
    case Datum::Kind::kDouble:
      return d.double_value();
    case Datum::Kind::kString:
    case Datum::Kind::kEnum:
      return d.bytes();
    case Datum::Kind::kBytes:
    case Datum::Kind::kFixed: {
      std::string hex;
      for (unsigned char c : d.bytes()) hex += fmt::format("{:02x}", c);
      return Json{{"$b", hex}};
    }
    case Datum::Kind::kArray: {
      Json a = Json::array();
      for (const Datum& x : d.items()) a.push_back(ToJson(x));
      return a;
    }
    case Datum::Kind::kRecord:
    case Datum::Kind::kMap: {
      Json o = Json::object();
      for (size_t k = 0; k < d.items().size(); ++k) o[d.names()[k]] = ToJson(d.items()[k]);
      return o;
    }
  }
  return nullptr;
}

std::string Hex(std::string_view b) {
  std::string out;
  for (unsigned char c : b) out += fmt::format("{:02x}", c);
  return out;
}

std::string Encoded(const Schema& s, const Datum& d) {
  std::string out;
  Status st = Encode(s.root(), d, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void ExpectError(const Status& st, std::string_view needle) {
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message: " << st.message() << "\nwanted: " << needle;
}

std::string WriteFile(const Schema& s, const std::vector<Datum>& objects, WriterOptions options) {
  FileWriter w(s, std::move(options));
  for (const Datum& d : objects) {
    Status st = w.Append(d);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto bytes = w.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return std::move(bytes).value();
}

// --- schema ------------------------------------------------------------------------------

TEST(AvroSchemaTest, ParsesIcebergManifestSchemaWithFieldIds) {
  Schema s = MustParse(kManifestSchema);
  const Node& root = s.root();
  ASSERT_EQ(root.type, Type::kRecord);
  EXPECT_EQ(root.full_name, "manifest_entry");
  const Field* df = root.FindField("data_file");
  ASSERT_NE(df, nullptr);
  EXPECT_EQ(IntAttribute(df->attributes, "field-id"), 2);
  const Node& r2 = *df->type;
  EXPECT_EQ(r2.FindField("file_path")->doc, "Location URI with FS scheme");
  const Node& sizes = *r2.FindField("column_sizes")->type;
  ASSERT_EQ(sizes.type, Type::kUnion);
  EXPECT_EQ(StringAttribute(sizes.branches[1]->attributes, "logicalType"), "map");
  EXPECT_EQ(IntAttribute(sizes.branches[1]->items->FindField("value")->attributes, "field-id"),
            118);
  const Node& offsets = *r2.FindField("split_offsets")->type->branches[1];
  EXPECT_EQ(IntAttribute(offsets.attributes, "element-id"), 133);
  EXPECT_TRUE(root.FindField("snapshot_id")->default_value->is_null());
  EXPECT_EQ(root.FindField("status")->default_value, std::nullopt);
}

TEST(AvroSchemaTest, ToJsonKeepsEveryAttributeAndParsesBackTheSame) {
  Schema s = MustParse(kManifestSchema);
  std::string json = s.ToJson();
  // Same meaning as the input: compare as JSON values (key order aside).
  EXPECT_EQ(Json::parse(json), Json::parse(kManifestSchema));
  Schema again = MustParse(json);
  EXPECT_EQ(again.ToJson(), json);
  EXPECT_EQ(Json::parse(MustParse(kEverySchema).ToJson()), Json::parse(kEverySchema));
}

TEST(AvroSchemaTest, NamedTypesAreWrittenOnceAndReferencedByFullName) {
  Schema s = MustParse(R"({"type": "record", "name": "pair", "namespace": "a.b", "fields": [
      {"name": "x", "type": {"type": "fixed", "name": "md5", "size": 16}},
      {"name": "y", "type": "md5"}, {"name": "z", "type": "a.b.md5"},
      {"name": "next", "type": ["null", "pair"], "default": null}]})");
  const Node& root = s.root();
  EXPECT_EQ(root.full_name, "a.b.pair");
  EXPECT_EQ(root.fields[0].type, root.fields[1].type);
  EXPECT_EQ(root.fields[0].type, root.fields[2].type);
  EXPECT_EQ(root.fields[3].type->branches[1], &root);  // recursive
  Json j = Json::parse(s.ToJson());
  EXPECT_EQ(j["fields"][1]["type"], "a.b.md5");
  EXPECT_EQ(j["fields"][3]["type"][1], "a.b.pair");
  // A recursive value round-trips.
  Datum list =
      Datum::Record({{"x", Datum::Fixed(std::string(16, 'a'))},
                     {"y", Datum::Fixed(std::string(16, 'b'))},
                     {"z", Datum::Fixed(std::string(16, 'c'))},
                     {"next", Datum::Record({{"x", Datum::Fixed(std::string(16, 'd'))},
                                             {"y", Datum::Fixed(std::string(16, 'e'))},
                                             {"z", Datum::Fixed(std::string(16, 'f'))}})}});
  auto back = Decode(root, Encoded(s, list));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Find("next")->Find("next")->kind(), Datum::Kind::kNull);
  EXPECT_EQ(back->Find("next")->Find("x")->bytes(), std::string(16, 'd'));
}

TEST(AvroSchemaTest, RejectsMalformedSchemasWithAClearError) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"("nope")", "unknown type or unresolved name \"nope\""},
      {R"({"type": "strang"})", "unresolved name \"strang\""},
      {R"({"type": "record", "name": "r"})", "r: record without a \"fields\" array"},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]})",
       "duplicate field \"a\""},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": ["null", ["int"]]}]})",
       "a union cannot contain a union"},
      {R"(["int", "int"])", "union has int twice"},
      {R"([])", "empty union"},
      {R"({"type": "fixed", "name": "f", "size": -1})", "fixed needs a \"size\" from 0"},
      {R"({"type": "fixed", "name": "f", "size": 1.5})", "fixed needs a \"size\""},
      {R"({"type": "fixed", "name": "f"})", "fixed needs a \"size\""},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": "other"}]})",
       "r.a: unknown type or unresolved name \"other\""},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int", "default": "x"}]})",
       "r.a: invalid default \"x\""},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a", "type": ["null", "int"], "default": 1}]})",
       "invalid default 1"},
      {R"({"type": "record", "name": "r", "fields": [{"name": "a-b", "type": "int"}]})",
       "valid \"name\""},
      {R"({"type": "record", "name": "int", "fields": []})", "cannot be called \"int\""},
      {R"({"type": "enum", "name": "e", "symbols": ["A", "A"]})", "duplicate enum symbol"},
      {R"([{"type": "fixed", "name": "f", "size": 1}, {"type": "fixed", "name": "f", "size": 2}])",
       "defined twice"},
      {R"({"type": "array"})", "array without \"items\""},
      {R"({"type": "map", "values": "nope"})", "unresolved name"},
      {R"({"type": "record", "name": "r", "fields": [)", "invalid JSON"},
      {R"(42)", "not a schema"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    auto s = Schema::Parse(c.json);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    ExpectError(s.status(), c.error);
  }
  std::string deep(200, '[');
  deep += "\"int\"" + std::string(200, ']');
  ExpectError(Schema::Parse(deep).status(), "nested deeper than 64");
  // An empty record is fine: Iceberg's unpartitioned partition record has no fields.
  EXPECT_TRUE(Schema::Parse(R"({"type": "record", "name": "r102", "fields": []})").ok());
}

// --- binary encoding ---------------------------------------------------------------------

TEST(AvroBinaryTest, ZigZagVarintsAsTheSpecificationShows) {
  Schema l = MustParse(R"("long")");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(0))), "00");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(-1))), "01");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(1))), "02");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(-64))), "7f");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(64))), "8001");
  EXPECT_EQ(Hex(Encoded(l, Datum::Long(INT64_MIN))), "ffffffffffffffffff01");
  for (int64_t v : {INT64_MIN, INT64_MIN + 1, int64_t{-300}, int64_t{0}, int64_t{300}, INT64_MAX}) {
    auto back = Decode(l.root(), Encoded(l, Datum::Long(v)));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->long_value(), v);
  }
  Schema i = MustParse(R"("int")");
  for (int32_t v : {INT32_MIN, -1, 0, 1, INT32_MAX}) {
    auto back = Decode(i.root(), Encoded(i, Datum::Int(v)));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->int_value(), v);
  }
  EXPECT_EQ(Hex(Encoded(MustParse(R"("string")"), Datum::String("foo"))), "06666f6f");
  EXPECT_EQ(Hex(Encoded(MustParse(R"("double")"), Datum::Double(1.0))), "000000000000f03f");
  EXPECT_EQ(Hex(Encoded(MustParse(R"(["null", "string"])"), Datum::String("a"))), "020261");
}

TEST(AvroBinaryTest, EveryTypeRoundTrips) {
  Schema s = MustParse(kEverySchema);
  for (int64_t i = 0; i < 50; ++i) {
    Datum d = Every(i);
    auto back = Decode(s.root(), Encoded(s, d));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, d) << back->ToString() << "\n" << d.ToString();
  }
  Schema m = MustParse(kManifestSchema);
  Datum e = ManifestEntry(3);
  auto back = Decode(m.root(), Encoded(m, e));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // The decoded entry has every field, in schema order; the left-out ones are null.
  EXPECT_EQ(back->names().size(), 4u);
  EXPECT_TRUE(back->Find("sequence_number")->is_null());
  EXPECT_EQ(back->LongAt("data_file.record_count").value(), 3000);
  EXPECT_EQ(back->StringAt("data_file.file_path").value(), "s3://bucket/t/data/00003.parquet");
  EXPECT_EQ(back->At("data_file.lower_bounds").value()->items()[2].BytesAt("value").value(),
            std::string("\x00\xff\x03", 3));
  EXPECT_EQ(back->At("data_file.partition.day").value()->is_null(), true);
  EXPECT_EQ(back->At("snapshot_id").value()->union_branch(), 1);
  ExpectError(back->LongAt("data_file.nope").status(), "data_file.nope: no such field");
  ExpectError(back->LongAt("data_file.file_path").status(),
              "data_file.file_path: expected long, got string");
  ExpectError(back->LongAt("status.x").status(), "status: not a record");
}

TEST(AvroBinaryTest, EncodeNamesTheFieldPathOfAMismatch) {
  Schema m = MustParse(kManifestSchema);
  Datum e = ManifestEntry(1);
  Datum bad = e;
  bad.Find("data_file")->Set("record_count", Datum::String("7"));
  std::string out = "keep";
  Status st = Encode(m.root(), bad, &out);
  ExpectError(st, "data_file.record_count: expected long, got string");
  EXPECT_EQ(out, "keep");  // left as it was

  Datum missing = e;
  missing.Find("data_file")->Set("file_size_in_bytes", Datum::Null());
  ExpectError(Encode(m.root(), missing, &out),
              "data_file.file_size_in_bytes: expected long, got null");

  Datum no_status = Datum::Record({{"data_file", *e.At("data_file").value()}});
  ExpectError(Encode(m.root(), no_status, &out), "status: missing, and the field has no default");

  Datum extra = e;
  extra.Set("surprise", Datum::Int(1));
  ExpectError(Encode(m.root(), extra, &out), "has no field \"surprise\"");

  Datum bad_union = e;
  bad_union.Set("snapshot_id", Datum::String("x"));
  ExpectError(Encode(m.root(), bad_union, &out),
              "snapshot_id: expected union [null, long], got string");

  Datum bad_item = e;
  Datum& sizes = *bad_item.Find("data_file")->Find("column_sizes");
  sizes.mutable_items()[1].Set("value", Datum::Int(3));
  ExpectError(Encode(m.root(), bad_item, &out),
              "data_file.column_sizes[1].value: expected long, got int");

  Schema fixed = MustParse(R"({"type": "fixed", "name": "f", "size": 2})");
  ExpectError(Encode(fixed.root(), Datum::Fixed("abc"), &out), "takes 2 bytes, got 3");
  Schema en = MustParse(R"({"type": "enum", "name": "e", "symbols": ["A"]})");
  ExpectError(Encode(en.root(), Datum::Enum("B"), &out), "\"B\" is not a symbol of enum e");
  ExpectError(Encode(MustParse(R"("string")").root(), Datum::String("\xff"), &out),
              "not valid UTF-8");
}

TEST(AvroBinaryTest, UnionBranchChosenByKindOrExplicitly) {
  Schema s = MustParse(
      R"(["null", "int", "long", {"type": "record", "name": "a", "fields": [{"name": "x", "type": "int"}]},
                          {"type": "record", "name": "b", "fields": [{"name": "y", "type": "int"}]}])");
  EXPECT_EQ(Hex(Encoded(s, Datum::Long(1))), "0402");
  EXPECT_EQ(Hex(Encoded(s, Datum::Record({{"y", Datum::Int(1)}}))),
            "0802");  // the record whose fields fit
  EXPECT_EQ(Hex(Encoded(s, Datum::Record({{"x", Datum::Int(1)}}))), "0602");
  std::string out;
  ExpectError(Encode(s.root(), Datum::Long(1).WithBranch(1), &out), "expected int, got long");
  ExpectError(Encode(s.root(), Datum::Long(1).WithBranch(9), &out), "union branch 9");
}

TEST(AvroBinaryTest, ReadsArraysAndMapsInManyBlocksWithByteSizes) {
  Schema a = MustParse(R"({"type": "array", "items": "long"})");
  // Block of 2 (positive count), block of -2 with its byte size 2, end.
  std::string bytes(
      "\x04\x02\x04"
      "\x03\x04\x06\x08"
      "\x00",
      8);
  auto back = Decode(a.root(), bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToString(), "[1L, 2L, 3L, 4L]");
  // A byte size that does not match what the items took.
  ExpectError(Decode(a.root(), std::string("\x03\x06\x06\x08\x00\x00\x00", 7)).status(),
              "block declared 3 bytes");
  Schema m = MustParse(R"({"type": "map", "values": "int"})");
  back = Decode(m.root(), std::string("\x02\x02"
                                      "a\x02"
                                      "\x01\x06\x02"
                                      "b\x04"
                                      "\x00",
                                      10));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToString(), "{\"a\": 1, \"b\": 2}");
}

TEST(AvroBinaryTest, DecodeRejectsBadBytesAtTheirOffset) {
  Schema l = MustParse(R"("long")");
  ExpectError(Decode(l.root(), "").status(), "at byte 0: truncated varint");
  ExpectError(Decode(l.root(), std::string(10, '\xff') + "\x01").status(),
              "at byte 0: varint overflows 64 bits");
  ExpectError(Decode(l.root(), "\x02\x02").status(), "at byte 1: 1 bytes after the value");
  ExpectError(Decode(MustParse(R"("int")").root(), "\xff\xff\xff\xff\x1f").status(),
              "varint overflows 32 bits");
  Schema s = MustParse(R"("string")");
  ExpectError(Decode(s.root(), "\x01").status(), "negative string length -1");
  ExpectError(Decode(s.root(),
                     "\x0a"
                     "ab")
                  .status(),
              "string length 5 but only 2 bytes left");
  ExpectError(Decode(s.root(), "\x02\xff").status(), "not valid UTF-8");
  ExpectError(Decode(MustParse(R"("boolean")").root(), "\x02").status(), "boolean byte 2");
  ExpectError(Decode(MustParse(R"(["null", "int"])").root(), "\x04").status(),
              "union index 2 of 2");
  ExpectError(Decode(MustParse(R"({"type": "enum", "name": "e", "symbols": ["A"]})").root(), "\x02")
                  .status(),
              "enum index 1 of 1");
  // A declared count far beyond the bytes left: an error, not a huge allocation.
  Schema a = MustParse(R"({"type": "array", "items": "long"})");
  ExpectError(Decode(a.root(), "\xfe\xff\xff\xff\x0f\x02").status(),
              "count 2147483647 of values of at least 1 bytes");
  Schema nulls = MustParse(R"({"type": "array", "items": "null"})");
  ExpectError(Decode(nulls.root(), "\xfe\xff\xff\xff\xff\xff\xff\xff\x7f").status(),
              "take no bytes is over the limit");
  EXPECT_TRUE(Decode(nulls.root(), std::string_view("\x06\x00", 2)).ok());
  // Where in the value it went wrong.
  Schema m = MustParse(kManifestSchema);
  std::string e = Encoded(m, ManifestEntry(1));
  auto st = Decode(m.root(), e.substr(0, 40)).status();
  ExpectError(st, "at byte 14: data_file.file_path: string length 32 but only 25 bytes left");
}

TEST(AvroBinaryTest, DeepNestingIsAnErrorNotACrash) {
  Schema s = MustParse(
      R"({"type": "record", "name": "n", "fields": [{"name": "c", "type": ["null", "n"]}]})");
  std::string deep(1000, '\x02');  // branch 1 (another n) a thousand times
  ExpectError(Decode(s.root(), deep).status(), "nested deeper than 64 levels");
  Datum d;
  for (int i = 0; i < 100; ++i) d = Datum::Record({{"c", std::move(d)}});
  std::string out;
  ExpectError(Encode(s.root(), d, &out), "nested deeper than 64 levels");
}

// --- object container files --------------------------------------------------------------

TEST(AvroFileTest, RoundTripsWithNullAndDeflateInManyBlocks) {
  Schema m = MustParse(kManifestSchema);
  std::vector<Datum> entries;
  for (int i = 0; i < 500; ++i) entries.push_back(ManifestEntry(i));
  for (Codec codec : {Codec::kNull, Codec::kDeflate}) {
    SCOPED_TRACE(static_cast<int>(codec));
    std::string bytes = WriteFile(m, entries,
                                  {.codec = codec,
                                   .block_bytes = 4096,
                                   .metadata = {{"format-version", "2"}, {"content", "data"}}});
    EXPECT_EQ(bytes.substr(0, 4), std::string("Obj\x01", 4));
    auto f = ReadFile(bytes);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->codec, codec);
    ASSERT_EQ(f->objects.size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(f->objects[i].LongAt("data_file.record_count").value(),
                static_cast<int64_t>(i) * 1000);
      EXPECT_EQ(*f->objects[i].At("data_file.lower_bounds").value(),
                *entries[i].At("data_file.lower_bounds").value());
    }
    EXPECT_EQ(*f->FindMetadata("format-version"), "2");
    EXPECT_EQ(*f->FindMetadata("avro.codec"), codec == Codec::kNull ? "null" : "deflate");
    EXPECT_EQ(f->schema.ToJson(), m.ToJson());
    // Blocks of at most about 4 KiB: many sync markers.
    std::string sync = bytes.substr(bytes.size() - 16);
    size_t markers = 0;
    for (size_t p = bytes.find(sync); p != std::string::npos; p = bytes.find(sync, p + 1))
      ++markers;
    EXPECT_GT(markers, codec == Codec::kNull ? 10u : 3u);
  }
  // An empty file is a header alone.
  auto empty = ReadFile(WriteFile(m, {}, {}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->objects.empty());
}

TEST(AvroFileTest, WriterRejectsBadDatumsAndReservedMetadata) {
  Schema m = MustParse(kManifestSchema);
  FileWriter w(m, {});
  ASSERT_TRUE(w.Append(ManifestEntry(1)).ok());
  ExpectError(w.Append(Datum::Long(1)), "value: expected record manifest_entry, got long");
  ASSERT_TRUE(w.Append(ManifestEntry(2)).ok());
  auto bytes = w.Finish();
  ASSERT_TRUE(bytes.ok());
  auto f = ReadFile(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->objects.size(), 2u);
  FileWriter reserved(m, {.metadata = {{"avro.codec", "snappy"}}});
  ExpectError(reserved.Append(ManifestEntry(1)), "\"avro.codec\" is reserved");
}

class AvroMalformedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_json_ = std::string(kManifestSchema);
    std::vector<Datum> entries;
    for (int i = 0; i < 6; ++i) entries.push_back(ManifestEntry(i));
    Schema m = MustParse(kManifestSchema);
    sync_.fill(0xAB);
    plain_ =
        WriteFile(m, entries, {.block_bytes = 600, .metadata = {{"schema", "{}"}}, .sync = sync_});
    deflated_ =
        WriteFile(m, entries, {.codec = Codec::kDeflate, .block_bytes = 600, .sync = sync_});
  }
  std::string schema_json_;
  std::array<uint8_t, 16> sync_{};
  std::string plain_, deflated_;
};

TEST_F(AvroMalformedFileTest, EveryTruncationIsAnErrorNotACrash) {
  for (const std::string* file : {&plain_, &deflated_}) {
    ASSERT_TRUE(ReadFile(*file).ok());
    size_t header = file->find(std::string(16, '\xab')) + 16;
    for (size_t n = 0; n < file->size(); ++n) {
      auto f = ReadFile(std::string_view(*file).substr(0, n));
      // Cut exactly after a block's sync marker the file is a valid, shorter file.
      if (f.ok()) {
        EXPECT_GE(n, header);
        EXPECT_EQ(file->substr(n - 16, 16), std::string(16, '\xab')) << n;
        continue;
      }
      EXPECT_NE(f.status().message().find("at byte"), std::string::npos) << f.status().message();
    }
  }
}

TEST_F(AvroMalformedFileTest, NamesWhatIsWrongAndWhere) {
  ExpectError(ReadFile("Obj\x02").status(), "at byte 0: not an Avro object container file");
  ExpectError(ReadFile("").status(), "not an Avro object container file");
  // A wrong sync marker after the first block.
  std::string bad_sync = plain_;
  size_t first = bad_sync.find(std::string(16, '\xab'));
  size_t second = bad_sync.find(std::string(16, '\xab'), first + 16);
  bad_sync[second] = 'x';
  ExpectError(ReadFile(bad_sync).status(),
              fmt::format("at byte {}: sync marker of the block at byte {}", second, first + 16));
  // A corrupt deflate block.
  std::string bad_deflate = deflated_;
  size_t block = bad_deflate.find(std::string(16, '\xab')) + 16;
  for (size_t k = block + 4; k < block + 40; ++k) bad_deflate[k] = '\xff';
  auto st = ReadFile(bad_deflate).status();
  ExpectError(st, fmt::format("at byte {}: deflate block: invalid deflate data", block + 3));
  // A block that inflates past the limit.
  ExpectError(ReadFile(deflated_, {.max_block_bytes = 100}).status(),
              "inflates to more than 100 bytes");
  ExpectError(ReadFile(plain_, {.max_block_bytes = 100}).status(), "over the limit of 100");
}

// Builds a file from parts: the header's metadata entries, then raw block bytes.
std::string RawFile(const std::vector<std::pair<std::string, std::string>>& meta,
                    std::string_view blocks,
                    std::string_view sync = std::string_view("0123456789abcdef")) {
  std::string out("Obj\x01", 4);
  auto bytes = [&](std::string_view b) {
    WriteLong(static_cast<int64_t>(b.size()), &out);
    out.append(b);
  };
  WriteLong(static_cast<int64_t>(meta.size()), &out);
  for (const auto& [k, v] : meta) {
    bytes(k);
    bytes(v);
  }
  out.push_back(0);
  out.append(sync);
  out.append(blocks);
  return out;
}

TEST(AvroRawFileTest, RejectsBadHeadersCountsAndCodecs) {
  const std::string sync = "0123456789abcdef";
  std::vector<std::pair<std::string, std::string>> meta = {{"avro.schema", "\"long\""}};
  auto ok = ReadFile(RawFile(meta, "\x04\x04\x02\x04" + sync));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->objects.size(), 2u);
  ExpectError(ReadFile(RawFile({}, "")).status(), "no avro.schema");
  ExpectError(ReadFile(RawFile({{"avro.schema", "{\"type\": \"wat\"}"}}, "")).status(),
              "avro.schema: schema: schema: unknown type or unresolved name \"wat\"");
  ExpectError(
      ReadFile(RawFile({{"avro.schema", "\"long\""}, {"avro.codec", "snappy"}}, "")).status(),
      "avro.codec \"snappy\" is not supported");
  ExpectError(
      ReadFile(RawFile({{"avro.schema", "\"long\""}, {"avro.schema", "\"int\""}}, "")).status(),
      "metadata key \"avro.schema\" twice");
  // Negative object count, negative and oversized block sizes, huge counts.
  ExpectError(ReadFile(RawFile(meta, "\x01\x02\x02" + sync)).status(), "negative count -1");
  ExpectError(ReadFile(RawFile(meta, "\x02\x01\x02" + sync)).status(), "negative block length -1");
  ExpectError(ReadFile(RawFile(meta, "\x02\x7e\x02" + sync)).status(),
              "block length 63 but only 17 bytes left");
  ExpectError(ReadFile(RawFile(meta, "\xfe\xff\xff\xff\x0f\x02\x02" + sync)).status(),
              "block of 2147483647 objects in 1 bytes");
  ExpectError(ReadFile(RawFile(meta, "\x02\x04\x02\x04" + sync)).status(),
              "1 bytes after the block's 1 objects");
  // A metadata map claiming more entries than there are bytes.
  std::string huge("Obj\x01\xfe\xff\xff\xff\xff\xff\xff\xff\x7f", 13);
  ExpectError(ReadFile(huge).status(), "at byte 4: count 4611686018427387903");
  // Values that take no bytes: bounded by a budget.
  std::vector<std::pair<std::string, std::string>> null_meta = {{"avro.schema", "\"null\""}};
  ExpectError(
      ReadFile(RawFile(null_meta, std::string("\xfe\xff\xff\xff\x0f\x00", 6) + sync)).status(),
      "take no bytes");
  EXPECT_EQ(ReadFile(RawFile(null_meta, std::string("\x06\x00", 2) + sync))->objects.size(), 3u);
}

// --- interop with Python's avro (python3-avro) ------------------------------------------

constexpr std::string_view kPythonScript = R"PY(
import datetime, json, sys, warnings
import avro.datafile, avro.io, avro.schema

warnings.simplefilter("ignore")  # avro warns that it does not know Iceberg's logicalType map

def conv(v):
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days
    if isinstance(v, bytes):
        return {"$b": v.hex()}
    if isinstance(v, dict):
        return {k: conv(x) for k, x in v.items()}
    if isinstance(v, list):
        return [conv(x) for x in v]
    return v

def ids(node, path, out):
    if isinstance(node, dict):
        for f in node.get("fields", []):
            if "field-id" in f:
                out[path + f["name"]] = f["field-id"]
            ids(f["type"], path + f["name"] + ".", out)
        for k in ("items", "values"):
            if k in node:
                ids(node[k], path, out)
        if "element-id" in node:
            out[path + "element"] = node["element-id"]
        if "logicalType" in node:
            out[path + "logicalType"] = node["logicalType"]
    elif isinstance(node, list):
        for b in node:
            ids(b, path, out)

def every(i):
    return {"b": i % 2 == 0, "i": i - 500, "l": i * 1000000007 - 2**40, "f": i + 0.5, "d": i / 4.0,
            "s": "str-%d-\u00e9" % i, "by": bytes([i % 256, 0, 255]), "e": "ABC"[i % 3],
            "fx": i.to_bytes(4, "big"), "a": list(range(i % 4)), "m": {"k%d" % k: k for k in range(i % 3)},
            "u": None if i % 2 else "u%d" % i, "n": None, "r": {"x": -i}}

if sys.argv[1] == "read":
    with open(sys.argv[2], "rb") as f:
        r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
        records = [conv(x) for x in r]
        meta = {k: v.decode("utf-8") for k, v in r.meta.items()}
        field_ids = {}
        ids(json.loads(meta["avro.schema"]), "", field_ids)
        print(json.dumps({"records": records, "meta": meta, "field_ids": field_ids}))
else:
    path, codec, n, schema_json = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    avro.datafile.SYNC_INTERVAL = 2000
    with open(path, "wb") as f:
        w = avro.datafile.DataFileWriter(f, avro.io.DatumWriter(), avro.schema.parse(schema_json), codec=codec)
        w.set_meta("format-version", b"2")
        for i in range(n):
            w.append(every(i))
        w.close()
)PY";

constexpr const char* kPython = "/usr/bin/python3";

bool PythonHasAvro() {
  std::string cmd =
      fmt::format("{} -c 'import avro.datafile, avro.io, avro.schema' >/dev/null 2>&1", kPython);
  return std::system(cmd.c_str()) == 0;
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the script with `args`; its standard output, or a failure.
std::string RunPython(const std::string& dir, const std::string& args) {
  std::string script = dir + "/avro_interop.py";
  std::ofstream(script) << kPythonScript;
  std::string cmd = fmt::format("{} {} {}", kPython, script, args);
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = p ? pclose(p) : -1;
  EXPECT_EQ(rc, 0) << cmd;
  return out;
}

[[maybe_unused]] ::testing::Environment* const kScratchDirs =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs("sluice_avro"));

// An empty directory of this test program's, removed when the tests end.
std::string TempDir() { return ScratchDirs::Fresh("sluice_avro", "interop"); }

TEST(AvroInteropTest, PythonReadsOurManifestFiles) {
  if (!PythonHasAvro())
    GTEST_SKIP() << kPython << " cannot import avro (apt-get install python3-avro)";
  std::string dir = TempDir();
  Schema m = MustParse(kManifestSchema);
  std::vector<Datum> entries;
  for (int i = 0; i < 300; ++i) entries.push_back(ManifestEntry(i));
  for (Codec codec : {Codec::kNull, Codec::kDeflate}) {
    SCOPED_TRACE(static_cast<int>(codec));
    std::string path = dir + (codec == Codec::kNull ? "/ours_null.avro" : "/ours_deflate.avro");
    std::ofstream(path, std::ios::binary)
        << WriteFile(m, entries,
                     {.codec = codec,
                      .block_bytes = 2048,
                      .metadata = {{"schema", R"({"type":"struct","schema-id":0})"},
                                   {"partition-spec", "[]"},
                                   {"partition-spec-id", "0"},
                                   {"format-version", "2"},
                                   {"content", "data"}}});
    Json got = Json::parse(RunPython(dir, "read " + ShellQuote(path)), nullptr, false);
    ASSERT_FALSE(got.is_discarded());
    ASSERT_EQ(got["records"].size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      // Python gives every field, the defaulted ones too.
      Json want = ToJson(entries[i]);
      want["sequence_number"] = nullptr;
      want["data_file"]["sort_order_id"] = nullptr;
      ASSERT_EQ(got["records"][i], want) << i;
    }
    for (const char* key :
         {"schema", "partition-spec", "partition-spec-id", "format-version", "content"}) {
      EXPECT_TRUE(got["meta"].contains(key)) << key;
    }
    EXPECT_EQ(got["meta"]["avro.codec"], codec == Codec::kNull ? "null" : "deflate");
    Json ids = got["field_ids"];
    EXPECT_EQ(ids["status"], 0);
    EXPECT_EQ(ids["data_file"], 2);
    EXPECT_EQ(ids["data_file.file_path"], 100);
    EXPECT_EQ(ids["data_file.partition.day"], 1000);
    EXPECT_EQ(ids["data_file.column_sizes.key"], 117);
    EXPECT_EQ(ids["data_file.column_sizes.value"], 118);
    EXPECT_EQ(ids["data_file.column_sizes.logicalType"], "map");
    EXPECT_EQ(ids["data_file.lower_bounds.value"], 127);
    EXPECT_EQ(ids["data_file.split_offsets.element"], 133);
    EXPECT_EQ(ids["data_file.sort_order_id"], 140);
  }
}

TEST(AvroInteropTest, WeReadPythonFiles) {
  if (!PythonHasAvro())
    GTEST_SKIP() << kPython << " cannot import avro (apt-get install python3-avro)";
  std::string dir = TempDir();
  const int n = 400;
  for (const char* codec : {"null", "deflate"}) {
    SCOPED_TRACE(codec);
    std::string path = dir + "/python_" + codec + ".avro";
    RunPython(dir, fmt::format("write {} {} {} {}", ShellQuote(path), codec, n,
                               ShellQuote(kEverySchema)));
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto f = ReadFile(bytes);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->codec, std::string_view(codec) == "null" ? Codec::kNull : Codec::kDeflate);
    EXPECT_EQ(*f->FindMetadata("format-version"), "2");
    ASSERT_EQ(f->objects.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(f->objects[static_cast<size_t>(i)], Every(i))
          << i << "\n"
          << f->objects[static_cast<size_t>(i)].ToString() << "\n"
          << Every(i).ToString();
    }
    // Python's blocks of about 2000 bytes: the file has many.
    std::string sync = bytes.substr(bytes.size() - 16);
    size_t markers = 0;
    for (size_t p = bytes.find(sync); p != std::string::npos; p = bytes.find(sync, p + 1))
      ++markers;
    EXPECT_GT(markers, 3u);
  }
}

}  // namespace
}  // namespace avro_test
}  // namespace sluice::lake::avro
