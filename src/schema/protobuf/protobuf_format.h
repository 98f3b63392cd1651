// Protobuf for the Schema Registry and for message payloads (issue 24): a .proto parser
// (proto2 and proto3) and a reader of base64 FileDescriptorProtos (what confluent-kafka's
// Python client registers), the registry's canonical and normalized text, Confluent's
// backward-compatibility rules, the framing's message indexes, and the DuckDB seam of
// schema/row_codec.h: a RowDecoder that writes payloads straight into DuckDB vectors and a
// RowEncoder for the kafka sink. No protobuf library: README.md has the decisions and the
// type mapping.
//
//   ASSIGN_OR_RETURN(Parsed schema, Parse(text, refs));            // InvalidArgument: 42201
//   std::string stored = Canonical(schema);
//   std::vector<int> indexes; size_t used; std::string why;
//   if (!ReadMessageIndexes(payload, &indexes, &used, &why)) ...
//   ASSIGN_OR_RETURN(auto columns, ColumnsOf(schema, indexes));
//   ASSIGN_OR_RETURN(auto dec, MakeRowDecoder(schema, indexes, columns));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "schema/row_codec.h"

namespace sluice::schema::protobuf {

// A schema another one imports (`import "name";`): Confluent's schema reference.
struct Reference {
  std::string name;
  std::string schema_text;
};

// descriptor.proto's FieldDescriptorProto.Type values.
enum class FieldType : uint8_t {
  kDouble = 1,
  kFloat = 2,
  kInt64 = 3,
  kUint64 = 4,
  kInt32 = 5,
  kFixed64 = 6,
  kFixed32 = 7,
  kBool = 8,
  kString = 9,
  kGroup = 10,
  kMessage = 11,
  kBytes = 12,
  kUint32 = 13,
  kEnum = 14,
  kSfixed32 = 15,
  kSfixed64 = 16,
  kSint32 = 17,
  kSint64 = 18,
};

// The .proto spelling of a scalar type ("int64"), or "" for message, enum and group.
std::string_view ScalarName(FieldType t);

// kNone: a proto3 field written without a label (and oneof members).
enum class Label : uint8_t { kNone, kOptional, kRequired, kRepeated };

// An option as written: `name` with its parentheses ("(my.ext).x"), `value` as .proto text
// (strings quoted and escaped, identifiers and numbers as they are).
struct Option {
  std::string name;
  std::string value;
};

struct MessageType;
struct EnumType;

struct Field {
  std::string name;
  int32_t number = 0;
  Label label = Label::kNone;
  FieldType type = FieldType::kInt32;
  std::string type_name;  // message/enum/group type as written ("" for scalars)
  int oneof = -1;         // index into MessageType::oneofs, or -1
  bool proto3_optional = false;
  std::string default_value;  // proto2 [default = ...] as .proto text, or ""
  std::vector<Option> options;
  // map<key, value>: type/type_name above describe the value; the key is a scalar.
  bool is_map = false;
  FieldType map_key = FieldType::kString;
  // Resolved after parsing (message, enum or group types; map values).
  std::string full_type_name;  // without the leading dot
  const MessageType* message = nullptr;
  const EnumType* enumeration = nullptr;
  uint32_t line = 0, column = 0;  // where it was written (text input), for errors
};

struct Oneof {
  std::string name;
  std::vector<Option> options;
};

struct EnumValue {
  std::string name;
  int32_t number = 0;
  std::vector<Option> options;
};

struct Range {
  int32_t start = 0;
  int32_t end = 0;  // inclusive
};

struct EnumType {
  std::string name;
  std::string full_name;  // package.Outer.Name
  std::vector<EnumValue> values;
  std::vector<Option> options;
  std::vector<Range> reserved_ranges;
  std::vector<std::string> reserved_names;
};

struct MessageType {
  std::string name;
  std::string full_name;
  std::vector<Field> fields;  // in declaration order, oneof members included
  std::vector<Oneof> oneofs;
  std::vector<MessageType> messages;  // nested (map entries are not messages here)
  std::vector<EnumType> enums;
  std::vector<Option> options;
  std::vector<Range> reserved_ranges;
  std::vector<std::string> reserved_names;
  std::vector<Range> extension_ranges;
  bool is_group = false;  // a proto2 group's body
};

struct Import {
  std::string path;
  enum class Kind : uint8_t { kPlain, kPublic, kWeak } kind = Kind::kPlain;
  uint32_t line = 0, column = 0;  // where it was written (text input), for errors
};

struct File {
  std::string name;    // import path; "" for the schema being registered
  std::string syntax;  // "proto2" or "proto3"
  std::string package;
  std::vector<Import> imports;
  std::vector<Option> options;
  std::vector<MessageType> messages;
  std::vector<EnumType> enums;
  // Services and extend blocks are parsed and dropped (the registry keeps message types).
};

// A parsed schema with its imports, every type name resolved. Move-only: fields point at
// the types they name.
struct Parsed {
  std::unique_ptr<File> file;
  std::vector<std::unique_ptr<File>> imports;  // every file reached through imports
  std::unordered_map<std::string, const MessageType*> messages;  // by full name
  std::unordered_map<std::string, const EnumType*> enums;
  std::unordered_map<const void*, const File*> owner;  // message/enum -> its file
};

// Parses .proto text, or a base64 FileDescriptorProto. `refs` are the files it imports
// (google/protobuf/{timestamp,duration,wrappers,empty,any,struct,field_mask}.proto are
// built in). InvalidArgument with line:column on a bad schema.
Result<Parsed> Parse(std::string_view schema_text, const std::vector<Reference>& refs);

// The .proto text the registry stores and compares: deterministic, complete and valid
// .proto text (also for a schema given as a descriptor).
std::string Canonical(const Parsed& schema);
// Canonical, and order-independent where order does not matter (imports and options
// sorted, fields by number, reserved ranges split and sorted, type names fully qualified),
// as Confluent's normalize=true.
std::string Normalized(const Parsed& schema);

// Confluent's Protobuf backward check: what keeps a reader with `reader` from reading data
// written with `writer`, e.g. "FIELD_SCALAR_KIND_CHANGED at #/Order/2". Empty: compatible.
std::vector<std::string> Incompatibilities(const Parsed& reader, const Parsed& writer);

// The text of a well-known type's file ("google/protobuf/timestamp.proto", ...) as this
// module knows it built in; nullptr for any other path. A schema importing one is
// registered with a reference to a subject of that name holding this text, as Confluent's
// serializers do.
const char* WellKnownFileText(std::string_view path);

// The framing's message indexes (after the magic byte and the schema id): a zig-zag varint
// count, then that many zig-zag varint indexes; the single byte 0 stands for [0].
// On success `*consumed` is the bytes read.
bool ReadMessageIndexes(std::string_view payload, std::vector<int>* indexes, size_t* consumed,
                        std::string* reason);
void WriteMessageIndexes(std::span<const int> indexes, std::string* out);
// The message at `indexes` in the file's message tree ([0] = first top-level message).
Result<const MessageType*> FindMessage(const Parsed& schema, std::span<const int> indexes);
// The reverse: the indexes of a message by its full name ("pkg.Outer.Inner") or, when not
// found, by its name relative to the package ("Outer.Inner").
Result<std::vector<int>> MessageIndexesOf(const Parsed& schema, std::string_view full_name);

// The DuckDB columns of a message's fields (README.md: "Type mapping").
Result<std::vector<Column>> ColumnsOf(const Parsed& schema, std::span<const int> message_indexes);

// A decoder of payloads written with `writer`'s message at `message_indexes` into
// `columns` (matched to fields by name, exactly, then ignoring ASCII case). InvalidArgument
// naming the field when a field's type cannot go into its column.
Result<std::unique_ptr<RowDecoder>> MakeRowDecoder(const Parsed& writer,
                                                   std::span<const int> message_indexes,
                                                   std::span<const Column> columns);

// proto3 .proto text with one message `message_name` whose fields are `columns` (README.md:
// "Encoding"). InvalidArgument for a column type with no Protobuf form.
Result<std::string> SchemaForColumns(std::span<const Column> columns,
                                     std::string_view message_name);

// An encoder of rows of `columns` as payloads of `schema`'s message at `message_indexes`
// (fields matched by name as MakeRowDecoder; a column without a field is an error).
Result<std::unique_ptr<RowEncoder>> MakeRowEncoder(const Parsed& schema,
                                                   std::span<const int> message_indexes,
                                                   std::span<const Column> columns);

}  // namespace sluice::schema::protobuf
