#include "lake/manifest.h"

#include <fmt/format.h>

#include <utility>
#include <variant>

#include "lake/avro.h"
#include "lake/avro_schema.h"
#include "lake/single_value.h"

namespace sluice::lake {
namespace {

using avro::Datum;

// The spec's manifest_entry (format v2), the partition tuple's fields spliced in.
std::string ManifestEntrySchema(std::string_view partition_fields) {
  auto int_map = [](std::string_view name, int id, int key, int value,
                    std::string_view value_type) {
    return fmt::format(
        R"({{"name":"{0}","type":["null",{{"type":"array","items":{{"type":"record","name":"k{2}_v{3}",)"
        R"("fields":[{{"name":"key","type":"int","field-id":{2}}},{{"name":"value","type":"{4}","field-id":{3}}}]}},)"
        R"("logicalType":"map"}}],"default":null,"field-id":{1}}})",
        name, id, key, value, value_type);
  };
  return fmt::format(
      R"({{"type":"record","name":"manifest_entry","fields":[)"
      R"({{"name":"status","type":"int","field-id":0}},)"
      R"({{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1}},)"
      R"({{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3}},)"
      R"({{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4}},)"
      R"({{"name":"data_file","type":{{"type":"record","name":"r2","fields":[)"
      R"({{"name":"content","type":"int","field-id":134}},)"
      R"({{"name":"file_path","type":"string","field-id":100}},)"
      R"({{"name":"file_format","type":"string","field-id":101}},)"
      R"({{"name":"partition","type":{{"type":"record","name":"r102","fields":{0}}},"field-id":102}},)"
      R"({{"name":"record_count","type":"long","field-id":103}},)"
      R"({{"name":"file_size_in_bytes","type":"long","field-id":104}},)"
      "{1},{2},{3},{4},{5},{6},"
      R"({{"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":131}},)"
      R"({{"name":"split_offsets","type":["null",{{"type":"array","items":"long","element-id":133}}],"default":null,"field-id":132}},)"
      R"({{"name":"equality_ids","type":["null",{{"type":"array","items":"int","element-id":136}}],"default":null,"field-id":135}},)"
      R"({{"name":"sort_order_id","type":["null","int"],"default":null,"field-id":140}})"
      R"(]}},"field-id":2}}]}})",
      partition_fields, int_map("column_sizes", 108, 117, 118, "long"),
      int_map("value_counts", 109, 119, 120, "long"),
      int_map("null_value_counts", 110, 121, 122, "long"),
      int_map("nan_value_counts", 137, 138, 139, "long"),
      int_map("lower_bounds", 125, 126, 127, "bytes"),
      int_map("upper_bounds", 128, 129, 130, "bytes"));
}

constexpr std::string_view kManifestListSchema =
    R"({"type":"record","name":"manifest_file","fields":[)"
    R"({"name":"manifest_path","type":"string","field-id":500},)"
    R"({"name":"manifest_length","type":"long","field-id":501},)"
    R"({"name":"partition_spec_id","type":"int","field-id":502},)"
    R"({"name":"content","type":"int","field-id":517},)"
    R"({"name":"sequence_number","type":"long","field-id":515},)"
    R"({"name":"min_sequence_number","type":"long","field-id":516},)"
    R"({"name":"added_snapshot_id","type":"long","field-id":503},)"
    R"({"name":"added_files_count","type":"int","field-id":504},)"
    R"({"name":"existing_files_count","type":"int","field-id":505},)"
    R"({"name":"deleted_files_count","type":"int","field-id":506},)"
    R"({"name":"added_rows_count","type":"long","field-id":512},)"
    R"({"name":"existing_rows_count","type":"long","field-id":513},)"
    R"({"name":"deleted_rows_count","type":"long","field-id":514},)"
    R"({"name":"partitions","type":["null",{"type":"array","items":{"type":"record","name":"r508","fields":[)"
    R"({"name":"contains_null","type":"boolean","field-id":509},)"
    R"({"name":"contains_nan","type":["null","boolean"],"default":null,"field-id":518},)"
    R"({"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510},)"
    R"({"name":"upper_bound","type":["null","bytes"],"default":null,"field-id":511}]},"element-id":508}],)"
    R"("default":null,"field-id":507},)"
    R"({"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":519}]})";

template <typename T, typename Make>
Datum IntKeyMap(const std::map<int32_t, T>& m, Make make) {
  std::vector<Datum> items;
  items.reserve(m.size());
  for (const auto& [k, v] : m)
    items.push_back(Datum::Record({{"key", Datum::Int(k)}, {"value", make(v)}}));
  return Datum::Array(std::move(items));
}

Datum Optional(std::optional<int64_t> v) { return v ? Datum::Long(*v) : Datum::Null(); }

Datum EntryDatum(const ManifestEntry& e) {
  const DataFile& f = e.file;
  auto as_long = [](int64_t v) { return Datum::Long(v); };
  auto as_bytes = [](const std::string& v) { return Datum::Bytes(v); };
  std::vector<Datum> offsets;
  for (int64_t o : f.split_offsets) offsets.push_back(Datum::Long(o));
  std::vector<Datum> equality;
  for (int32_t id : f.equality_ids) equality.push_back(Datum::Int(id));
  Datum file = Datum::Record({
      {"content", Datum::Int(f.content)},
      {"file_path", Datum::String(f.file_path)},
      {"file_format", Datum::String(f.file_format)},
      {"partition", f.partition},
      {"record_count", Datum::Long(f.record_count)},
      {"file_size_in_bytes", Datum::Long(f.file_size_in_bytes)},
      {"column_sizes", IntKeyMap(f.column_sizes, as_long)},
      {"value_counts", IntKeyMap(f.value_counts, as_long)},
      {"null_value_counts", IntKeyMap(f.null_value_counts, as_long)},
      {"nan_value_counts", IntKeyMap(f.nan_value_counts, as_long)},
      {"lower_bounds", IntKeyMap(f.lower_bounds, as_bytes)},
      {"upper_bounds", IntKeyMap(f.upper_bounds, as_bytes)},
      {"split_offsets", f.split_offsets.empty() ? Datum::Null() : Datum::Array(std::move(offsets))},
      {"equality_ids", f.equality_ids.empty() ? Datum::Null() : Datum::Array(std::move(equality))},
      {"sort_order_id", f.sort_order_id ? Datum::Int(*f.sort_order_id) : Datum::Null()},
  });
  return Datum::Record({{"status", Datum::Int(static_cast<int32_t>(e.status))},
                        {"snapshot_id", Optional(e.snapshot_id)},
                        {"sequence_number", Optional(e.sequence_number)},
                        {"file_sequence_number", Optional(e.file_sequence_number)},
                        {"data_file", std::move(file)}});
}

// Reading: a field that must be there, of the kind asked.
Result<const Datum*> Field(const Datum& record, std::string_view name, std::string_view where) {
  const Datum* d = record.Find(name);
  if (d == nullptr) return CorruptionError("{}: no field {}", where, name);
  return d;
}

template <typename T>
Result<std::map<int32_t, T>> ReadIntKeyMap(const Datum& record, std::string_view name,
                                           std::string_view where) {
  std::map<int32_t, T> out;
  const Datum* d = record.Find(name);
  if (d == nullptr || d->is_null()) return out;
  if (d->kind() != Datum::Kind::kArray)
    return CorruptionError("{}.{}: not an array of key/value", where, name);
  for (const Datum& kv : d->items()) {
    if (kv.kind() != Datum::Kind::kRecord)
      return CorruptionError("{}.{}: an entry is not a record", where, name);
    ASSIGN_OR_RETURN(int32_t key, kv.IntAt("key"));
    if constexpr (std::is_same_v<T, int64_t>) {
      ASSIGN_OR_RETURN(int64_t v, kv.LongAt("value"));
      out[key] = v;
    } else {
      ASSIGN_OR_RETURN(std::string_view v, kv.BytesAt("value"));
      out[key] = std::string(v);
    }
  }
  return out;
}

Result<std::optional<int64_t>> OptionalLong(const Datum& record, std::string_view name) {
  const Datum* d = record.Find(name);
  if (d == nullptr || d->is_null()) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, record.LongAt(name));
  return std::optional<int64_t>(v);
}

Result<ManifestEntry> ParseEntry(const Datum& d, const ManifestFile* inherit) {
  ManifestEntry e;
  ASSIGN_OR_RETURN(int32_t status, d.IntAt("status"));
  if (status < 0 || status > 2)
    return CorruptionError("manifest entry: status {} is not 0, 1 or 2", status);
  e.status = static_cast<EntryStatus>(status);
  ASSIGN_OR_RETURN(e.snapshot_id, OptionalLong(d, "snapshot_id"));
  ASSIGN_OR_RETURN(e.sequence_number, OptionalLong(d, "sequence_number"));
  ASSIGN_OR_RETURN(e.file_sequence_number, OptionalLong(d, "file_sequence_number"));
  if (inherit != nullptr) {
    // Inheritance (spec, "Sequence Number Inheritance"): only added entries may leave
    // them unset.
    if (!e.snapshot_id) e.snapshot_id = inherit->added_snapshot_id;
    if (!e.sequence_number && e.status == EntryStatus::kAdded)
      e.sequence_number = inherit->sequence_number;
    if (!e.file_sequence_number && e.status == EntryStatus::kAdded)
      e.file_sequence_number = inherit->sequence_number;
  }
  ASSIGN_OR_RETURN(const Datum* file, Field(d, "data_file", "manifest entry"));
  if (file->kind() != Datum::Kind::kRecord)
    return CorruptionError("manifest entry: data_file is not a record");
  DataFile& f = e.file;
  // Format v1 has no content field: every file is a data file.
  if (file->Find("content") != nullptr) {
    ASSIGN_OR_RETURN(f.content, file->IntAt("content"));
  }
  ASSIGN_OR_RETURN(std::string_view path, file->StringAt("file_path"));
  f.file_path = std::string(path);
  ASSIGN_OR_RETURN(std::string_view format, file->StringAt("file_format"));
  f.file_format = std::string(format);
  ASSIGN_OR_RETURN(const Datum* partition, Field(*file, "partition", "data_file"));
  f.partition = *partition;
  ASSIGN_OR_RETURN(f.record_count, file->LongAt("record_count"));
  ASSIGN_OR_RETURN(f.file_size_in_bytes, file->LongAt("file_size_in_bytes"));
  if (f.record_count < 0 || f.file_size_in_bytes < 0) {
    return CorruptionError("data_file {}: negative record_count or file_size_in_bytes",
                           f.file_path);
  }
  ASSIGN_OR_RETURN(f.column_sizes, ReadIntKeyMap<int64_t>(*file, "column_sizes", "data_file"));
  ASSIGN_OR_RETURN(f.value_counts, ReadIntKeyMap<int64_t>(*file, "value_counts", "data_file"));
  ASSIGN_OR_RETURN(f.null_value_counts,
                   ReadIntKeyMap<int64_t>(*file, "null_value_counts", "data_file"));
  ASSIGN_OR_RETURN(f.nan_value_counts,
                   ReadIntKeyMap<int64_t>(*file, "nan_value_counts", "data_file"));
  ASSIGN_OR_RETURN(f.lower_bounds, ReadIntKeyMap<std::string>(*file, "lower_bounds", "data_file"));
  ASSIGN_OR_RETURN(f.upper_bounds, ReadIntKeyMap<std::string>(*file, "upper_bounds", "data_file"));
  if (const Datum* s = file->Find("split_offsets"); s != nullptr && !s->is_null()) {
    if (s->kind() != Datum::Kind::kArray)
      return CorruptionError("data_file.split_offsets: not an array");
    for (const Datum& o : s->items()) {
      if (o.kind() != Datum::Kind::kLong)
        return CorruptionError("data_file.split_offsets: not a long");
      f.split_offsets.push_back(o.long_value());
    }
  }
  if (const Datum* s = file->Find("equality_ids"); s != nullptr && !s->is_null()) {
    if (s->kind() != Datum::Kind::kArray)
      return CorruptionError("data_file.equality_ids: not an array");
    for (const Datum& id : s->items()) {
      if (id.kind() != Datum::Kind::kInt)
        return CorruptionError("data_file.equality_ids: not an int");
      f.equality_ids.push_back(id.int_value());
    }
  }
  if (f.content == 2 && f.equality_ids.empty()) {
    return CorruptionError("equality delete file {} has no equality_ids", f.file_path);
  }
  if (f.content < 0 || f.content > 2) {
    return CorruptionError("data_file {}: content {} is not 0, 1 or 2", f.file_path, f.content);
  }
  if (const Datum* s = file->Find("sort_order_id"); s != nullptr && !s->is_null()) {
    ASSIGN_OR_RETURN(int32_t id, file->IntAt("sort_order_id"));
    f.sort_order_id = id;
  }
  return e;
}

}  // namespace

Result<std::vector<FieldSummary>> SummarizePartitions(const Type& tuple,
                                                      const std::vector<ManifestEntry>& entries) {
  std::vector<FieldSummary> out(tuple.fields.size());
  for (size_t i = 0; i < tuple.fields.size(); ++i) {
    const NestedField& field = tuple.fields[i];
    FieldSummary& s = out[i];
    const bool floating = field.type.id == TypeId::kFloat || field.type.id == TypeId::kDouble;
    if (floating) s.contains_nan = false;
    std::optional<Value> lo, hi;
    // Values of one field all hold the same alternative: compare them as that.
    auto less = [](const Value& a, const Value& b) {
      using Key = std::variant<std::monostate, bool, int32_t, int64_t, float, double, std::string>;
      auto key = [](const Value& v) -> Key {
        return std::visit(
            [](const auto& x) -> Key {
              using T = std::decay_t<decltype(x)>;
              if constexpr (std::is_constructible_v<Key, T> && !std::is_same_v<T, Bytes>) {
                return Key(x);
              } else {
                return Key();
              }
            },
            v.data);
      };
      return key(a) < key(b);
    };
    for (const ManifestEntry& e : entries) {
      const Datum* d = e.file.partition.Find(field.name);
      if (d == nullptr || d->is_null()) {
        s.contains_null = true;
        continue;
      }
      Value v;
      switch (d->kind()) {
        case Datum::Kind::kBoolean:
          v = Value::Boolean(d->boolean());
          break;
        case Datum::Kind::kInt:
          v = Value::Int(d->int_value());
          break;
        case Datum::Kind::kLong:
          v = Value::Long(d->long_value());
          break;
        case Datum::Kind::kFloat:
          v = Value::Float(d->float_value());
          break;
        case Datum::Kind::kDouble:
          v = Value::Double(d->double_value());
          break;
        case Datum::Kind::kString:
          v = Value::String(d->bytes());
          break;
        default:
          return UnimplementedError("partition field {}: no summary for {} values", field.name,
                                    avro::KindName(d->kind()));
      }
      if (floating) {
        double x = d->kind() == Datum::Kind::kFloat ? d->float_value() : d->double_value();
        if (x != x) {
          s.contains_nan = true;
          continue;
        }
      }
      if (!lo || less(v, *lo)) lo = v;
      if (!hi || less(*hi, v)) hi = v;
    }
    if (lo) {
      ASSIGN_OR_RETURN(Bytes b, ToSingleValueBinary(field.type, *lo));
      s.lower_bound = std::string(b.begin(), b.end());
    }
    if (hi) {
      ASSIGN_OR_RETURN(Bytes b, ToSingleValueBinary(field.type, *hi));
      s.upper_bound = std::string(b.begin(), b.end());
    }
  }
  return out;
}

Result<std::string> WriteManifest(const ManifestContext& context,
                                  const std::vector<ManifestEntry>& entries) {
  ASSIGN_OR_RETURN(avro::Schema schema,
                   avro::Schema::Parse(ManifestEntrySchema(context.partition_avro_fields)));
  avro::WriterOptions options;
  options.codec = avro::Codec::kDeflate;
  options.metadata = {
      {"schema", context.schema_json},
      {"schema-id", std::to_string(context.schema_id)},
      {"partition-spec", context.spec_fields_json},
      {"partition-spec-id", std::to_string(context.spec_id)},
      {"format-version", "2"},
      {"content", !entries.empty() && entries.front().file.content != 0 ? "deletes" : "data"}};
  avro::FileWriter writer(schema, std::move(options));
  for (const ManifestEntry& e : entries) RETURN_IF_ERROR(writer.Append(EntryDatum(e)));
  return writer.Finish();
}

Result<std::vector<ManifestEntry>> ReadManifest(std::string_view bytes,
                                                const ManifestFile* inherit) {
  ASSIGN_OR_RETURN(avro::File file, avro::ReadFile(bytes));
  std::vector<ManifestEntry> out;
  out.reserve(file.objects.size());
  for (size_t i = 0; i < file.objects.size(); ++i) {
    Result<ManifestEntry> e = ParseEntry(file.objects[i], inherit);
    if (!e.ok()) return CorruptionError("entry {}: {}", i, e.status().message());
    out.push_back(std::move(*e));
  }
  return out;
}

Result<std::string> WriteManifestList(int64_t snapshot_id,
                                      std::optional<int64_t> parent_snapshot_id,
                                      int64_t sequence_number,
                                      const std::vector<ManifestFile>& manifests) {
  ASSIGN_OR_RETURN(avro::Schema schema, avro::Schema::Parse(kManifestListSchema));
  avro::WriterOptions options;
  options.codec = avro::Codec::kDeflate;
  options.metadata = {
      {"snapshot-id", std::to_string(snapshot_id)},
      {"parent-snapshot-id", parent_snapshot_id ? std::to_string(*parent_snapshot_id) : "null"},
      {"sequence-number", std::to_string(sequence_number)},
      {"format-version", "2"}};
  avro::FileWriter writer(schema, std::move(options));
  for (const ManifestFile& m : manifests) {
    std::vector<Datum> partitions;
    for (const FieldSummary& s : m.partitions) {
      partitions.push_back(Datum::Record({
          {"contains_null", Datum::Boolean(s.contains_null)},
          {"contains_nan", s.contains_nan ? Datum::Boolean(*s.contains_nan) : Datum::Null()},
          {"lower_bound", s.lower_bound ? Datum::Bytes(*s.lower_bound) : Datum::Null()},
          {"upper_bound", s.upper_bound ? Datum::Bytes(*s.upper_bound) : Datum::Null()},
      }));
    }
    RETURN_IF_ERROR(writer.Append(Datum::Record({
        {"manifest_path", Datum::String(m.manifest_path)},
        {"manifest_length", Datum::Long(m.manifest_length)},
        {"partition_spec_id", Datum::Int(m.partition_spec_id)},
        {"content", Datum::Int(m.content)},
        {"sequence_number", Datum::Long(m.sequence_number)},
        {"min_sequence_number", Datum::Long(m.min_sequence_number)},
        {"added_snapshot_id", Datum::Long(m.added_snapshot_id)},
        {"added_files_count", Datum::Int(m.added_files_count)},
        {"existing_files_count", Datum::Int(m.existing_files_count)},
        {"deleted_files_count", Datum::Int(m.deleted_files_count)},
        {"added_rows_count", Datum::Long(m.added_rows_count)},
        {"existing_rows_count", Datum::Long(m.existing_rows_count)},
        {"deleted_rows_count", Datum::Long(m.deleted_rows_count)},
        {"partitions", Datum::Array(std::move(partitions))},
    })));
  }
  return writer.Finish();
}

Result<std::vector<ManifestFile>> ReadManifestList(std::string_view bytes) {
  ASSIGN_OR_RETURN(avro::File file, avro::ReadFile(bytes));
  std::vector<ManifestFile> out;
  for (size_t i = 0; i < file.objects.size(); ++i) {
    const Datum& d = file.objects[i];
    auto parse = [&]() -> Result<ManifestFile> {
      ManifestFile m;
      ASSIGN_OR_RETURN(std::string_view path, d.StringAt("manifest_path"));
      m.manifest_path = std::string(path);
      ASSIGN_OR_RETURN(m.manifest_length, d.LongAt("manifest_length"));
      ASSIGN_OR_RETURN(m.partition_spec_id, d.IntAt("partition_spec_id"));
      // v1 lists have no content or sequence numbers: data, 0.
      if (d.Find("content") != nullptr) {
        ASSIGN_OR_RETURN(m.content, d.IntAt("content"));
      }
      if (d.Find("sequence_number") != nullptr) {
        ASSIGN_OR_RETURN(m.sequence_number, d.LongAt("sequence_number"));
      }
      if (d.Find("min_sequence_number") != nullptr) {
        ASSIGN_OR_RETURN(m.min_sequence_number, d.LongAt("min_sequence_number"));
      }
      ASSIGN_OR_RETURN(m.added_snapshot_id, d.LongAt("added_snapshot_id"));
      auto count = [&](std::string_view v2, std::string_view v1, int32_t* out) -> Status {
        std::string_view name = d.Find(v2) != nullptr ? v2 : v1;
        const Datum* x = d.Find(name);
        if (x == nullptr || x->is_null()) return Status::OK();
        ASSIGN_OR_RETURN(*out, d.IntAt(name));
        return Status::OK();
      };
      RETURN_IF_ERROR(count("added_files_count", "added_data_files_count", &m.added_files_count));
      RETURN_IF_ERROR(
          count("existing_files_count", "existing_data_files_count", &m.existing_files_count));
      RETURN_IF_ERROR(
          count("deleted_files_count", "deleted_data_files_count", &m.deleted_files_count));
      ASSIGN_OR_RETURN(std::optional<int64_t> added_rows, OptionalLong(d, "added_rows_count"));
      ASSIGN_OR_RETURN(std::optional<int64_t> existing_rows,
                       OptionalLong(d, "existing_rows_count"));
      ASSIGN_OR_RETURN(std::optional<int64_t> deleted_rows, OptionalLong(d, "deleted_rows_count"));
      m.added_rows_count = added_rows.value_or(0);
      m.existing_rows_count = existing_rows.value_or(0);
      m.deleted_rows_count = deleted_rows.value_or(0);
      if (const Datum* p = d.Find("partitions"); p != nullptr && !p->is_null()) {
        if (p->kind() != Datum::Kind::kArray) return CorruptionError("partitions: not an array");
        for (const Datum& s : p->items()) {
          FieldSummary f;
          ASSIGN_OR_RETURN(f.contains_null, s.BooleanAt("contains_null"));
          if (const Datum* x = s.Find("contains_nan"); x != nullptr && !x->is_null()) {
            ASSIGN_OR_RETURN(bool nan, s.BooleanAt("contains_nan"));
            f.contains_nan = nan;
          }
          if (const Datum* x = s.Find("lower_bound"); x != nullptr && !x->is_null()) {
            ASSIGN_OR_RETURN(std::string_view b, s.BytesAt("lower_bound"));
            f.lower_bound = std::string(b);
          }
          if (const Datum* x = s.Find("upper_bound"); x != nullptr && !x->is_null()) {
            ASSIGN_OR_RETURN(std::string_view b, s.BytesAt("upper_bound"));
            f.upper_bound = std::string(b);
          }
          m.partitions.push_back(std::move(f));
        }
      }
      return m;
    };
    Result<ManifestFile> m = parse();
    if (!m.ok()) return CorruptionError("manifest list entry {}: {}", i, m.status().message());
    out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace sluice::lake
