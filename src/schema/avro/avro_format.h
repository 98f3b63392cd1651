// Avro for the Schema Registry and for message payloads: schemas parsed (with Confluent
// schema references), their canonical and normalized text, Avro's reader/writer
// compatibility rules, the DuckDB column types of a schema, and the RowDecoder/RowEncoder
// that move Avro binary payloads straight in and out of DuckDB vectors. The type mapping and
// the decisions are in src/schema/avro/README.md (and docs/design/0022-schemas.md).
//
//   ASSIGN_OR_RETURN(Parsed writer, Parse(text_from_registry, refs));
//   ASSIGN_OR_RETURN(std::vector<Column> columns, ColumnsOf(writer));
//   ASSIGN_OR_RETURN(auto decoder, MakeRowDecoder(writer, nullptr, columns));
//   std::vector<std::string> problems = Incompatibilities(new_schema, old_schema);
//
// Parsed schemas are immutable and may be shared between threads; decoders and encoders
// are owned by one thread each (schema/row_codec.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/avro_schema.h"
#include "schema/row_codec.h"

namespace sluice::schema::avro {

using lake::avro::Node;

// A schema this one refers to (Confluent schema references): the named types it defines
// may be used by full name in the referring schema. `name` is the reference's name (a
// subject-relative name such as "com.acme.Address.avsc"; informational here).
struct Reference {
  std::string name;
  std::string schema_text;
};

// A parsed schema. Move-only; the nodes it hands out live as long as it does.
class Parsed {
 public:
  Parsed(Parsed&&) noexcept = default;
  Parsed& operator=(Parsed&&) noexcept = default;
  ~Parsed();

  const Node& root() const { return *root_; }
  // True for a named type defined by one of the references (written by name, never
  // inlined, in Canonical and Normalized).
  bool IsReferenced(const Node* n) const;

 private:
  friend Result<Parsed> Parse(std::string_view, const std::vector<Reference>&);
  Parsed() = default;
  std::unique_ptr<lake::avro::Schema> schema_;
  const Node* root_ = nullptr;
  std::vector<const Node*> referenced_;
};

// Parses `schema_text` after `refs`, which must come dependencies first (as the registry
// resolves them), each once; references with identical text are taken once. Any schema the
// Avro specification allows is accepted, primitives ("string", {"type": "int"}) included.
// Errors are InvalidArgument ("schema: Order.total: unknown type or unresolved name
// \"Money\"").
Result<Parsed> Parse(std::string_view schema_text, const std::vector<Reference>& refs = {});

// Compact JSON the registry stores and compares: every attribute kept (names, namespaces,
// doc, defaults, aliases, order, logicalType, others); names written as Avro's Java
// toString() does (a simple name with "namespace" where it changes, a named type in full
// once and by name after that, referenced types by name). Parse(Canonical(p)) == p.
std::string Canonical(const Parsed& schema);

// The form for `normalize=true`: schemas that mean the same give the same text. Names are
// full names without "namespace", aliases are full names, {"type": "int"} is "int",
// attributes come in a fixed order (Avro's keys first, then the others sorted by name,
// their JSON values with sorted keys), "order": "ascending" (the default) is dropped.
std::string Normalized(const Parsed& schema);

// A 64-bit fingerprint (FNV-1a) of Normalized(): a cheap identity for caches.
uint64_t Fingerprint(const Parsed& schema);

// Why `reader` cannot read data written with `writer`, after Avro's schema resolution
// (Java's SchemaCompatibility, which Confluent uses); empty when it can. Each entry is
// "<TYPE> at <location>: <what>", e.g. "READER_FIELD_MISSING_DEFAULT_VALUE at /fields/2:
// field 'x' has no default". Types: NAME_MISMATCH, FIXED_SIZE_MISMATCH,
// MISSING_ENUM_SYMBOLS, READER_FIELD_MISSING_DEFAULT_VALUE, TYPE_MISMATCH,
// MISSING_UNION_BRANCH.
std::vector<std::string> Incompatibilities(const Parsed& reader, const Parsed& writer);

// The DuckDB columns of a schema: a record's fields, else one column `value`. Errors
// (InvalidArgument) for what DuckDB cannot hold: a recursive record, nesting deeper than
// kMaxTypeDepth, a union of more than 255 members.
inline constexpr int kMaxTypeDepth = 32;
Result<std::vector<Column>> ColumnsOf(const Parsed& schema);

// A decoder of payloads written with `writer` into `columns` (the table's columns, or
// ColumnsOf(*reader)). `reader`, when given, supplies defaults for columns and struct
// fields the writer lacks, and enum defaults for symbols it does not know. A writer type
// that cannot go into its column is InvalidArgument naming the field and both types.
Result<std::unique_ptr<RowDecoder>> MakeRowDecoder(const Parsed& writer, const Parsed* reader,
                                                   std::span<const Column> columns);

// The Avro schema (JSON) of a record `record_name` whose fields are `columns`, each a union
// ["null", T] with default null. InvalidArgument for column types without an Avro form.
Result<std::string> SchemaForColumns(std::span<const Column> columns, std::string_view record_name);

// An encoder of rows of `columns` as Avro binary of `schema` (usually the Parse of
// SchemaForColumns(columns)). Record fields take the column of their name (exact, then
// ignoring ASCII case); a field without a column is written as its default.
Result<std::unique_ptr<RowEncoder>> MakeRowEncoder(const Parsed& schema,
                                                   std::span<const Column> columns);

}  // namespace sluice::schema::avro
