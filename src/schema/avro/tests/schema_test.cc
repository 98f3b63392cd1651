// Avro schemas for the registry: parsing (references, primitives, errors), the canonical and
// normalized forms, the compatibility rules (each passing and failing), the DuckDB column
// types of a schema and the schema of DuckDB columns.
#include <gtest/gtest.h>

#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"

namespace sluice::schema::avro {
namespace {

Parsed P(std::string_view text, const std::vector<Reference>& refs = {}) {
  auto p = Parse(text, refs);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
  if (!p.ok()) return Parse("\"null\"").value();
  return std::move(*p);
}

std::string ParseError(std::string_view text, const std::vector<Reference>& refs = {}) {
  auto p = Parse(text, refs);
  if (p.ok()) return "<parsed>";
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  return p.status().message();
}

// ---- Parse ----

TEST(AvroParseTest, PrimitivesAreSchemas) {
  EXPECT_EQ(Canonical(P(R"("string")")), R"("string")");
  EXPECT_EQ(Canonical(P(R"({"type":"int"})")), R"("int")");
  EXPECT_EQ(Canonical(P(R"(["null","long"])")), R"(["null","long"])");
}

TEST(AvroParseTest, InvalidSchemasSayWhat) {
  EXPECT_NE(ParseError("{").find("invalid JSON"), std::string::npos);
  EXPECT_NE(ParseError(R"("strin")").find("unknown type"), std::string::npos);
  EXPECT_NE(ParseError(R"({"type":"record","name":"R"})").find("fields"), std::string::npos);
  EXPECT_NE(
      ParseError(
          R"({"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]})")
          .find("invalid default"),
      std::string::npos);
  EXPECT_NE(ParseError(R"({"type":"enum","name":"E","symbols":["A","A"]})").find("duplicate"),
            std::string::npos);
  EXPECT_NE(ParseError(R"(["int","int"])").find("twice"), std::string::npos);
  EXPECT_NE(ParseError(R"({"type":"fixed","name":"F","size":-1})").find("size"), std::string::npos);
  EXPECT_NE(ParseError(std::string(100, '[') + std::string(100, ']')).find("deeper"),
            std::string::npos);
}

TEST(AvroParseTest, ReferencedNamedTypesResolveByFullName) {
  Reference address{
      "address.avsc",
      R"({"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]})"};
  Parsed p = P(R"({"type":"record","name":"Order","namespace":"com.acme","fields":[
      {"name":"id","type":"long"},{"name":"ship_to","type":"com.acme.Address"},
      {"name":"bill_to","type":"Address"}]})",
               {address});
  EXPECT_EQ(p.root().full_name, "com.acme.Order");
  EXPECT_EQ(p.root().fields[1].type->full_name, "com.acme.Address");
  EXPECT_TRUE(p.IsReferenced(p.root().fields[1].type));
  // Referenced types are written by name, never inlined.
  EXPECT_EQ(
      Canonical(p),
      R"({"type":"record","name":"Order","namespace":"com.acme","fields":[{"name":"id","type":"long"},{"name":"ship_to","type":"Address"},{"name":"bill_to","type":"Address"}]})");
  // Without the reference the name is unknown.
  EXPECT_NE(
      ParseError(
          R"({"type":"record","name":"Order","fields":[{"name":"a","type":"com.acme.Address"}]})")
          .find("com.acme.Address"),
      std::string::npos);
}

TEST(AvroParseTest, ReferencesChainAndRepeat) {
  Reference money{"money", R"({"type":"fixed","name":"Money","namespace":"m","size":8})"};
  Reference price{
      "price",
      R"({"type":"record","name":"Price","namespace":"m","fields":[{"name":"amount","type":"m.Money"}]})"};
  Parsed p = P(R"({"type":"array","items":"m.Price"})", {money, price, money});
  EXPECT_EQ(Canonical(p), R"({"type":"array","items":"m.Price"})");
  // A bad reference is named in the error.
  std::string e = ParseError(R"("m.Price")", {{"broken", "{\"type\":"}});
  EXPECT_NE(e.find("broken"), std::string::npos) << e;
  // A type defined by a reference and again by the schema is an error.
  e = ParseError(R"({"type":"fixed","name":"Money","namespace":"m","size":8})", {money});
  EXPECT_NE(e.find("defined twice"), std::string::npos) << e;
  // A reference cannot reach into the schema's JSON.
  e = ParseError(R"("int"}, {"name":"x","type":"long")", {money});
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
}

// ---- Canonical and Normalized ----

TEST(AvroCanonicalTest, KeepsEverythingAndReparses) {
  const char* text = R"({
    "type": "record", "name": "a.b.Event", "doc": "an event", "aliases": ["Old"],
    "fields": [
      {"name": "id", "type": {"type": "string", "logicalType": "uuid"}, "doc": "key"},
      {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["X", "Y"], "default": "X"},
       "default": "Y", "order": "descending"},
      {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}, "x-extra": {"b": 1, "a": 2}},
      {"name": "next", "type": ["null", "Event"], "default": null, "aliases": ["after"]}
    ]})";
  Parsed p = P(text);
  std::string c = Canonical(p);
  EXPECT_EQ(
      c,
      R"({"type":"record","name":"Event","namespace":"a.b","doc":"an event","fields":[)"
      R"({"name":"id","type":{"type":"string","logicalType":"uuid"},"doc":"key"},)"
      R"({"name":"kind","type":{"type":"enum","name":"Kind","symbols":["X","Y"],"default":"X"},"default":"Y","order":"descending"},)"
      R"({"name":"when","type":{"type":"long","logicalType":"timestamp-millis"},"x-extra":{"b":1,"a":2}},)"
      R"({"name":"next","type":["null","Event"],"default":null,"aliases":["after"]}],"aliases":["Old"]})");
  EXPECT_EQ(Canonical(P(c)), c);
  EXPECT_EQ(Normalized(P(c)), Normalized(p));
}

TEST(AvroCanonicalTest, NamespaceWrittenWhereItChanges) {
  Parsed p = P(R"({"type":"record","name":"R","namespace":"x","fields":[
      {"name":"a","type":{"type":"fixed","name":"F","size":2}},
      {"name":"b","type":{"type":"fixed","name":"y.G","size":2}},
      {"name":"c","type":"y.G"}, {"name":"d","type":"F"}]})");
  EXPECT_EQ(Canonical(p),
            R"({"type":"record","name":"R","namespace":"x","fields":[)"
            R"({"name":"a","type":{"type":"fixed","name":"F","size":2}},)"
            R"({"name":"b","type":{"type":"fixed","name":"G","namespace":"y","size":2}},)"
            R"({"name":"c","type":"y.G"},{"name":"d","type":"F"}]})");
}

TEST(AvroNormalizedTest, SameSchemaWrittenDifferentlyIsEqual) {
  Parsed a =
      P(R"({"type":"record","name":"Event","namespace":"a.b","fields":[
      {"name":"n","type":{"type":"int"},"order":"ascending","x":{"q":1,"p":2},"aliases":["z","y"]},
      {"name":"e","type":"Event2"}]})",
        {{"e2", R"({"type":"enum","name":"a.b.Event2","symbols":["A"],"aliases":["Old"]})"}});
  Parsed b = P(
      R"({"fields":[
      {"aliases":["y","z"],"x":{"p":2,"q":1},"type":"int","name":"n"},
      {"type":"a.b.Event2","name":"e"}],"name":"a.b.Event","type":"record"})",
      {{"e2",
        R"({"symbols":["A"],"namespace":"a.b","name":"Event2","type":"enum","aliases":["a.b.Old"]})"}});
  EXPECT_EQ(Normalized(a), Normalized(b));
  EXPECT_EQ(Fingerprint(a), Fingerprint(b));
  EXPECT_EQ(
      Normalized(a),
      R"({"type":"record","name":"a.b.Event","fields":[{"name":"n","type":"int","aliases":["y","z"],"x":{"p":2,"q":1}},{"name":"e","type":"a.b.Event2"}]})");
  EXPECT_NE(Canonical(a), Canonical(b));  // as written: the registry keeps both texts apart
  EXPECT_NE(Normalized(a), Normalized(P(R"({"type":"record","name":"a.b.Event","fields":[]})")));
}

// ---- Compatibility ----

std::vector<std::string> Check(std::string_view reader, std::string_view writer) {
  return Incompatibilities(P(reader), P(writer));
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

TEST(AvroCompatibilityTest, Promotions) {
  EXPECT_TRUE(Check(R"("long")", R"("int")").empty());
  EXPECT_TRUE(Check(R"("float")", R"("int")").empty());
  EXPECT_TRUE(Check(R"("double")", R"("long")").empty());
  EXPECT_TRUE(Check(R"("double")", R"("float")").empty());
  EXPECT_TRUE(Check(R"("bytes")", R"("string")").empty());
  EXPECT_TRUE(Check(R"("string")", R"("bytes")").empty());
  EXPECT_EQ(Joined(Check(R"("int")", R"("long")")),
            "TYPE_MISMATCH at /: reader type: int not compatible with writer type: long\n");
  EXPECT_FALSE(Check(R"("float")", R"("double")").empty());
  EXPECT_FALSE(Check(R"("string")", R"("int")").empty());
}

TEST(AvroCompatibilityTest, RecordFieldsAndDefaults) {
  const char* v1 = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"}]})";
  const char* v2_default =
      R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]})";
  const char* v2_no_default =
      R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]})";
  EXPECT_TRUE(Check(v2_default, v1).empty());
  EXPECT_TRUE(Check(v1, v2_no_default).empty());  // a writer field the reader lacks is skipped
  EXPECT_EQ(Joined(Check(v2_no_default, v1)),
            "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/1: field 'b' has no default and the "
            "writer has no such field\n");
  // Nested: the location says where.
  EXPECT_EQ(
      Joined(Check(
          R"({"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":"int"}]})",
          R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"long"}]})")),
      "TYPE_MISMATCH at /fields/1/type: reader type: int not compatible with writer type: long\n");
  // A renamed field is found through the reader's aliases.
  EXPECT_TRUE(
      Check(R"({"type":"record","name":"R","fields":[{"name":"z","type":"int","aliases":["a"]}]})",
            v1)
          .empty());
}

TEST(AvroCompatibilityTest, NamesAndAliases) {
  EXPECT_EQ(Joined(Check(R"({"type":"record","name":"S","fields":[]})",
                         R"({"type":"record","name":"R","fields":[]})")),
            "NAME_MISMATCH at /name: reader record S does not match writer R\n");
  EXPECT_TRUE(Check(R"({"type":"record","name":"S","aliases":["R"],"fields":[]})",
                    R"({"type":"record","name":"R","fields":[]})")
                  .empty());
  // Unqualified names match, as in Java's SchemaCompatibility.
  EXPECT_TRUE(Check(R"({"type":"record","name":"a.R","fields":[]})",
                    R"({"type":"record","name":"b.R","fields":[]})")
                  .empty());
}

TEST(AvroCompatibilityTest, Enums) {
  const char* ab = R"({"type":"enum","name":"E","symbols":["A","B"]})";
  const char* abc = R"({"type":"enum","name":"E","symbols":["A","B","C"]})";
  const char* ab_default = R"({"type":"enum","name":"E","symbols":["A","B"],"default":"A"})";
  EXPECT_TRUE(Check(abc, ab).empty());
  EXPECT_EQ(Joined(Check(ab, abc)),
            "MISSING_ENUM_SYMBOLS at /symbols: reader enum E lacks writer symbols [C]\n");
  EXPECT_TRUE(Check(ab_default, abc).empty());
}

TEST(AvroCompatibilityTest, FixedSize) {
  EXPECT_TRUE(
      Check(R"({"type":"fixed","name":"F","size":4})", R"({"type":"fixed","name":"F","size":4})")
          .empty());
  EXPECT_EQ(Joined(Check(R"({"type":"fixed","name":"F","size":4})",
                         R"({"type":"fixed","name":"F","size":8})")),
            "FIXED_SIZE_MISMATCH at /size: expected: 8, found: 4\n");
}

TEST(AvroCompatibilityTest, Unions) {
  EXPECT_TRUE(Check(R"(["null","string"])", R"("string")").empty());
  EXPECT_TRUE(Check(R"(["null","long"])", R"("int")").empty());  // by promotion
  EXPECT_TRUE(Check(R"(["null","string","int"])", R"(["int","null"])").empty());
  EXPECT_EQ(Joined(Check(R"(["null","string"])", R"("int")")),
            "MISSING_UNION_BRANCH at /: reader union lacking writer type: int\n");
  EXPECT_EQ(Joined(Check(R"(["null","string"])", R"(["null","string","int"])")),
            "MISSING_UNION_BRANCH at /2: reader union lacking writer type: int\n");
  // A writer union into a plain reader: every branch must fit.
  EXPECT_TRUE(Check(R"("long")", R"(["int","long"])").empty());
  EXPECT_EQ(Joined(Check(R"("string")", R"(["null","string"])")),
            "TYPE_MISMATCH at /0: reader type: string not compatible with writer type: null\n");
}

TEST(AvroCompatibilityTest, ArraysMapsAndRecursion) {
  EXPECT_TRUE(
      Check(R"({"type":"array","items":"long"})", R"({"type":"array","items":"int"})").empty());
  EXPECT_EQ(
      Joined(Check(R"({"type":"map","values":"int"})", R"({"type":"map","values":"string"})")),
      "TYPE_MISMATCH at /values: reader type: int not compatible with writer type: string\n");
  EXPECT_FALSE(
      Check(R"({"type":"array","items":"int"})", R"({"type":"map","values":"int"})").empty());
  const char* list =
      R"({"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","L"]}]})";
  EXPECT_TRUE(Check(list, list).empty());
}

// ---- ColumnsOf ----

std::string ColumnsSql(std::string_view schema) {
  auto cols = ColumnsOf(P(schema));
  if (!cols.ok()) return "error: " + cols.status().message();
  std::string out;
  for (const Column& c : *cols) {
    if (!out.empty()) out += ", ";
    out += c.name + " " + TypeSql(c.type);
  }
  return out;
}

TEST(AvroColumnsTest, EveryMapping) {
  EXPECT_EQ(
      ColumnsSql(R"({"type":"record","name":"R","fields":[
      {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
      {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},
      {"name":"y","type":"bytes"},{"name":"x","type":{"type":"fixed","name":"X","size":3}},
      {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
      {"name":"a","type":{"type":"array","items":"int"}},
      {"name":"m","type":{"type":"map","values":"double"}},
      {"name":"r","type":{"type":"record","name":"In","fields":[{"name":"q","type":"string"}]}},
      {"name":"n1","type":["null","long"]},{"name":"n2","type":["long","null"]},
      {"name":"u","type":["null","int","string","In"]}]})"),
      "b BOOLEAN, i INTEGER, l BIGINT, f FLOAT, d DOUBLE, s VARCHAR, y BLOB, x BLOB, e VARCHAR, "
      "a INTEGER[], m MAP(VARCHAR, DOUBLE), r STRUCT(\"q\" VARCHAR), n1 BIGINT, n2 BIGINT, "
      "u UNION(\"int\" INTEGER, \"string\" VARCHAR, \"In\" STRUCT(\"q\" VARCHAR))");
}

TEST(AvroColumnsTest, LogicalTypes) {
  std::string sql = ColumnsSql(R"({"type":"record","name":"R","fields":[
      {"name":"d1","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
      {"name":"d2","type":{"type":"fixed","name":"D","size":16,"logicalType":"decimal","precision":38,"scale":4}},
      {"name":"d3","type":{"type":"bytes","logicalType":"decimal","precision":50,"scale":2}},
      {"name":"dt","type":{"type":"int","logicalType":"date"}},
      {"name":"t1","type":{"type":"int","logicalType":"time-millis"}},
      {"name":"t2","type":{"type":"long","logicalType":"time-micros"}},
      {"name":"ts1","type":{"type":"long","logicalType":"timestamp-millis"}},
      {"name":"ts2","type":{"type":"long","logicalType":"timestamp-micros"}},
      {"name":"ts3","type":{"type":"long","logicalType":"timestamp-nanos"}},
      {"name":"lt1","type":{"type":"long","logicalType":"local-timestamp-millis"}},
      {"name":"lt2","type":{"type":"long","logicalType":"local-timestamp-micros"}},
      {"name":"u","type":{"type":"string","logicalType":"uuid"}},
      {"name":"du","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
      {"name":"bad","type":{"type":"long","logicalType":"date"}}]})");
  EXPECT_EQ(sql,
            "d1 DECIMAL(10,2), d2 DECIMAL(38,4), d3 VARCHAR, dt DATE, t1 TIME, t2 TIME, "
            "ts1 TIMESTAMP WITH TIME ZONE, ts2 TIMESTAMP WITH TIME ZONE, ts3 TIMESTAMP_NS, "
            "lt1 TIMESTAMP, lt2 TIMESTAMP, u UUID, du INTERVAL, bad BIGINT");
}

TEST(AvroColumnsTest, TopLevelNonRecordAndRefusals) {
  EXPECT_EQ(ColumnsSql(R"("string")"), "value VARCHAR");
  EXPECT_EQ(ColumnsSql(R"(["null","double"])"), "value DOUBLE");
  EXPECT_NE(
      ColumnsSql(R"({"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]})")
          .find("contains itself"),
      std::string::npos);
  EXPECT_NE(
      ColumnsSql(
          R"({"type":"record","name":"R","fields":[{"name":"e","type":{"type":"record","name":"E","fields":[]}}]})")
          .find("no fields"),
      std::string::npos);
}

TEST(AvroSchemaForColumnsTest, NullableFieldsWithDefaults) {
  std::vector<Column> cols;
  cols.push_back({"id", duck::LogicalType::BigInt()});
  cols.push_back({"first name", duck::LogicalType::Varchar()});
  cols.push_back({"at", duck::LogicalType::TimestampTz()});
  cols.push_back({"price", DecimalType(10, 2)});
  cols.push_back({"tags", duck::LogicalType::List(duck::LogicalType::Varchar())});
  std::vector<duck::LogicalType> fields;
  fields.push_back(duck::LogicalType::Varchar());
  cols.push_back({"addr", duck::LogicalType::Struct({"city"}, fields)});
  cols.push_back({"attrs", MapType(duck::LogicalType::Varchar(), duck::LogicalType::Integer())});
  auto s = SchemaForColumns(cols, "com.acme.Row");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(
      *s,
      R"({"type":"record","name":"com.acme.Row","fields":[)"
      R"({"name":"id","type":["null","long"],"default":null},)"
      R"({"name":"first_name","type":["null","string"],"default":null},)"
      R"({"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},)"
      R"({"name":"price","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}],"default":null},)"
      R"({"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null},)"
      R"({"name":"addr","type":["null",{"type":"record","name":"Row_addr","fields":[{"name":"city","type":["null","string"],"default":null}]}],"default":null},)"
      R"({"name":"attrs","type":["null",{"type":"map","values":["null","int"]}],"default":null}]})");
  std::vector<Column> bad;
  bad.push_back({"m", MapType(duck::LogicalType::Integer(), duck::LogicalType::Integer())});
  EXPECT_FALSE(SchemaForColumns(bad, "R").ok());
}

}  // namespace
}  // namespace sluice::schema::avro
