#include "sinks/iceberg_sink.h"

#include <fmt/format.h>
#include <pthread.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/crash_point.h"
#include "base/strings.h"
#include "duck/chunk_feed.h"
#include "lake/data_files.h"
#include "lake/duck_types.h"
#include "lake/storage.h"
#include "lake/table_update.h"

namespace sluice::sinks {
namespace {

using lake::DataFile;
using lake::NestedField;
using lake::PartitionField;
using lake::PartitionSpec;
using lake::Schema;
using lake::Type;

constexpr std::string_view kIcebergStage = "sluice_iceberg_stage";
// Chunks (of up to 2048 rows) a batch may queue ahead of the file's writer before the
// pipeline waits for it: the memory between the two threads.
constexpr size_t kQueuedChunks = 32;

// "day(ts)" -> a partition field over `schema` (ids of the schema being created).
Result<PartitionField> ParsePartition(std::string_view text, const Schema& schema) {
  std::string_view t = Trim(text);
  std::string transform = "identity", column(t), arg;
  if (size_t open = t.find('('); open != t.npos) {
    if (t.back() != ')')
      return InvalidArgumentError("partition_by {}: expected transform(column)", text);
    transform = std::string(Trim(t.substr(0, open)));
    std::string_view inside = t.substr(open + 1, t.size() - open - 2);
    if (size_t comma = inside.find(','); comma != inside.npos) {
      arg = std::string(Trim(inside.substr(0, comma)));
      column = std::string(Trim(inside.substr(comma + 1)));
    } else {
      column = std::string(Trim(inside));
    }
  }
  const NestedField* source = nullptr;
  for (const NestedField& f : schema.fields) {
    if (f.name == column) source = &f;
  }
  if (source == nullptr)
    return InvalidArgumentError("partition_by {}: the results have no column {}", text, column);
  std::string spec_text = arg.empty() ? transform : fmt::format("{}[{}]", transform, arg);
  Result<lake::Transform> parsed = lake::Transform::Parse(spec_text);
  if (!parsed.ok())
    return InvalidArgumentError("partition_by {}: {}", text, parsed.status().message());
  if (Result<Type> r = parsed->ResultType(source->type); !r.ok()) {
    return InvalidArgumentError("partition_by {}: {}", text, r.status().message());
  }
  std::string suffix = transform == "identity"   ? ""
                       : transform == "truncate" ? "_trunc"
                                                 : "_" + transform;
  PartitionField f;
  f.source_id = source->id;
  f.field_id = -1;
  f.name = source->name + suffix;
  f.transform = *parsed;
  return f;
}

// The SQL of a partition field's value over the staged rows, for the transforms DuckDB
// can compute as Iceberg defines them (UTC for time zones, floor for negatives).
Result<std::string> PartitionSql(const PartitionField& p, const Schema& schema) {
  const NestedField* source = schema.FindField(p.source_id);
  if (source == nullptr)
    return InternalError("partition source {} is not in the schema", p.source_id);
  std::string c = "s." + lake::QuoteId(source->name);
  lake::TypeId t = source->type.id;
  std::string ts =
      t == lake::TypeId::kTimestampTz ? fmt::format("make_timestamp(epoch_us({}))", c) : c;
  std::string text = p.transform.ToString();
  if (text == "identity") return c;
  if (text == "void") return std::string("NULL");
  if (text == "year") return fmt::format("(year({}) - 1970)", ts);
  if (text == "month") return fmt::format("((year({0}) - 1970) * 12 + month({0}) - 1)", ts);
  if (text == "day") {
    if (t == lake::TypeId::kDate) return fmt::format("({} - DATE '1970-01-01')", c);
    return fmt::format("CAST(floor(epoch_us({}) / 86400000000.0) AS INTEGER)", c);
  }
  if (text == "hour") return fmt::format("CAST(floor(epoch_us({}) / 3600000000.0) AS INTEGER)", c);
  if (text.starts_with("truncate[")) {
    int64_t w = std::strtoll(text.c_str() + 9, nullptr, 10);
    if (t == lake::TypeId::kInt || t == lake::TypeId::kLong)
      return fmt::format("({0} - ((({0} % {1}) + {1}) % {1}))", c, w);
    if (t == lake::TypeId::kString) return fmt::format("left({}, {})", c, w);
  }
  return UnimplementedError(
      "the iceberg sink cannot partition by {} of a {} column yet (identity, year, month, day, "
      "hour, bucket, and truncate of int, long and string are supported)",
      text, source->type.ToString());
}

lake::Value SourceValue(const Type& type, const std::string& text) {
  switch (type.id) {
    case lake::TypeId::kInt:
    case lake::TypeId::kDate:
      return lake::Value::Int(static_cast<int32_t>(std::strtoll(text.c_str(), nullptr, 10)));
    case lake::TypeId::kString:
      return lake::Value::String(text);
    default:
      return lake::Value::Long(std::strtoll(text.c_str(), nullptr, 10));
  }
}

// A partition value from SQL text, as the Avro datum of its result type.
lake::avro::Datum PartitionDatum(const Type& type, const std::optional<std::string>& text) {
  using lake::avro::Datum;
  if (!text) return Datum::Null();
  switch (type.id) {
    case lake::TypeId::kInt:
    case lake::TypeId::kDate:
      return Datum::Int(static_cast<int32_t>(std::strtoll(text->c_str(), nullptr, 10)));
    case lake::TypeId::kLong:
    case lake::TypeId::kTime:
    case lake::TypeId::kTimestamp:
    case lake::TypeId::kTimestampTz:
      return Datum::Long(std::strtoll(text->c_str(), nullptr, 10));
    case lake::TypeId::kBoolean:
      return Datum::Boolean(*text == "true");
    case lake::TypeId::kFloat:
      return Datum::Float(std::strtof(text->c_str(), nullptr));
    case lake::TypeId::kDouble:
      return Datum::Double(std::strtod(text->c_str(), nullptr));
    default:
      return Datum::String(*text);
  }
}

// A value as SQL text that PartitionDatum and SourceValue read back: times as
// microseconds, dates as days, the rest as DuckDB prints them.
std::string ValueText(const Type& type, const std::string& expr) {
  switch (type.id) {
    case lake::TypeId::kDate:
      return fmt::format("({} - DATE '1970-01-01')::VARCHAR", expr);
    case lake::TypeId::kTimestamp:
    case lake::TypeId::kTimestampTz:
      return fmt::format("epoch_us({})::VARCHAR", expr);
    case lake::TypeId::kTime:
      return fmt::format("epoch_us(DATE '1970-01-01' + {})::VARCHAR", expr);
    default:
      return fmt::format("({})::VARCHAR", expr);
  }
}

// The text of a bucket source value (ValueText); "" for types the sink does not bucket.
std::string SourceText(const Type& type, const std::string& c) {
  switch (type.id) {
    case lake::TypeId::kInt:
    case lake::TypeId::kLong:
    case lake::TypeId::kDate:
    case lake::TypeId::kTime:
    case lake::TypeId::kTimestamp:
    case lake::TypeId::kTimestampTz:
    case lake::TypeId::kString:
      return ValueText(type, c);
    default:
      return "";
  }
}

// A partition value as a directory name (readers never parse it): URL-encoded as Java's
// writers do, cut to 64 bytes plus a hash of the whole when longer.
std::string PathPart(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  if (out == "." || out == "..") out = "%2E" + out.substr(1);
  if (out.size() > 64)
    out = fmt::format("{}-{:016x}", out.substr(0, 64), std::hash<std::string_view>{}(value));
  return out;
}

std::string OffsetsKey(const std::string& group, const std::string& topic) {
  return fmt::format("sluice.offsets.{}.{}", group, topic);
}

}  // namespace

// The data file being written: `COPY (SELECT * FROM feed()) TO file` on a thread and
// connection of its own, reading the batches pushed into its ChunkFeed as they come, with
// the file's statistics from the writer (lake::WriteDataFile). One file at a time.
class IcebergSink::FileWriter {
 public:
  static Result<std::unique_ptr<FileWriter>> Create(duck::Database& db) {
    ASSIGN_OR_RETURN(std::unique_ptr<duck::Connection> conn, duck::Connection::Open(db));
    ASSIGN_OR_RETURN(std::shared_ptr<duck::ChunkFeed> feed,
                     duck::ChunkFeed::Create(*conn, kQueuedChunks));
    return std::unique_ptr<FileWriter>(new FileWriter(std::move(conn), std::move(feed)));
  }
  ~FileWriter() { Abandon(); }

  bool writing() const { return thread_.joinable(); }
  int32_t schema_id() const { return schema_id_; }
  const std::string& path() const { return path_; }

  // A new file of `schema` at `path` (the table calls it `location`), whose rows have the
  // given columns (the schema's).
  void Start(const Schema& schema, const std::vector<std::string>& names,
             const std::vector<duck::LogicalType>& types, std::string path, std::string location) {
    feed_->Open(names, types);
    path_ = std::move(path);
    location_ = std::move(location);
    schema_id_ = schema.schema_id;
    result_.reset();
    thread_ = std::thread([this, schema] {
      Result<DataFile> f = lake::WriteDataFile(
          *conn_, fmt::format("SELECT * FROM {}()", duck::QuoteIdentifier(feed_->function_name())),
          schema, path_, location_);
      feed_->ReaderGone(f.ok() ? std::string("the file was finished") : f.status().message());
      result_.emplace(std::move(f));
    });
    pthread_setname_np(thread_.native_handle(), "sluice-iceberg");
  }

  // Waits while the writer is more than kQueuedChunks behind; an error when it failed.
  Status Push(duck::QueryResult rows) {
    Status st = feed_->Push(std::move(rows));
    if (st.ok()) return st;
    // The writer's own error says more than the feed's. Its file goes either way: rows
    // pushed before are in it, but not this batch's.
    Result<DataFile> ended = Finish();
    Remove();
    return ended.ok() ? st : ended.status();
  }

  // Ends the file after the rows pushed and describes it; on an error the file is gone.
  Result<DataFile> Finish() {
    feed_->Close();
    thread_.join();
    Result<DataFile> out = std::move(*result_);
    result_.reset();
    if (!out.ok()) Remove();
    return out;
  }

  // Fails the COPY and removes its file.
  void Abandon() {
    if (!thread_.joinable()) return;
    feed_->Abandon("the file's rows were discarded");
    thread_.join();
    result_.reset();
    Remove();
  }

 private:
  FileWriter(std::unique_ptr<duck::Connection> conn, std::shared_ptr<duck::ChunkFeed> feed)
      : conn_(std::move(conn)), feed_(std::move(feed)) {}
  void Remove() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }

  std::unique_ptr<duck::Connection> conn_;
  std::shared_ptr<duck::ChunkFeed> feed_;
  std::thread thread_;
  std::string path_;
  std::string location_;
  int32_t schema_id_ = -1;
  std::optional<Result<DataFile>> result_;  // set by the thread before it ends
};

IcebergSink::~IcebergSink() {
  DropFiles();
  if (!staging_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(staging_, ec);
  }
}

IcebergSink::IcebergSink(IcebergSinkOptions options, std::string root)
    : options_(std::move(options)),
      root_(std::move(root)),
      last_commit_(std::chrono::steady_clock::now()) {}

Result<std::unique_ptr<IcebergSink>> IcebergSink::Create(IcebergSinkOptions options) {
  if (options.namespace_.empty() || options.table.empty()) {
    return InvalidArgumentError("iceberg sink: table_name must be namespace.table");
  }
  if (options.catalog) {
    // Through a REST catalog: the table's location is the catalog's, known once loaded.
    ASSIGN_OR_RETURN(std::shared_ptr<lake::RestCatalogClient> catalog,
                     lake::RestCatalogClient::Connect(*options.catalog));
    auto sink = std::unique_ptr<IcebergSink>(new IcebergSink(std::move(options), ""));
    sink->catalog_ = std::move(catalog);
    Result<lake::Table> table = sink->LoadTable();
    if (table.ok()) {
      RETURN_IF_ERROR(sink->Adopt(std::move(*table)));
    } else if (table.status().code() != StatusCode::kNotFound) {
      return table.status();
    }
    return sink;
  }
  if (options.warehouse.empty()) {
    return InvalidArgumentError(
        "iceberg sink: no warehouse: set sink.iceberg.warehouse, sink.iceberg.catalog or "
        "SLUICE_WAREHOUSE");
  }
  // A relative directory is the pipeline's working directory's.
  std::string given = options.warehouse;
  if (given.find("://") == std::string::npos && given.rfind("file:", 0) != 0 && given[0] != '/') {
    given = std::filesystem::absolute(given).lexically_normal().string();
  }
  const bool remote = lake::IsS3Location(given);
  std::string warehouse;
  if (remote) {
    warehouse = lake::NormalLocation(given);
    RETURN_IF_ERROR(lake::SplitS3Location(warehouse).status());
    RETURN_IF_ERROR(lake::StorageFor(warehouse).status());
  } else {
    ASSIGN_OR_RETURN(warehouse, lake::LocalPath(given));
  }
  std::string root = warehouse;
  for (const std::string& level : options.namespace_) root += "/" + level;
  root += "/" + options.table;
  auto sink = std::unique_ptr<IcebergSink>(new IcebergSink(std::move(options), root));
  if (remote) {
    sink->remote_ = true;
    ASSIGN_OR_RETURN(sink->staging_, lake::NewS3StagingDir());
  }
  Result<lake::Table> table = lake::Table::Load(root);
  if (table.ok()) {
    sink->table_.emplace(std::move(*table));
  } else if (table.status().code() != StatusCode::kNotFound) {
    return table.status();
  }
  return sink;
}

Result<lake::Table> IcebergSink::LoadTable() const {
  if (catalog_) {
    return lake::Table::Open(lake::RestTableStore(catalog_, options_.namespace_, options_.table));
  }
  return lake::Table::Load(root_);
}

Status IcebergSink::Adopt(lake::Table table) {
  if (catalog_ && root_.empty()) {
    root_ = table.files().root();
    remote_ = lake::IsS3Location(root_);
    if (remote_) {
      RETURN_IF_ERROR(lake::StorageFor(root_).status());
      ASSIGN_OR_RETURN(staging_, lake::NewS3StagingDir());
    }
  }
  table_.emplace(std::move(table));
  return Status::OK();
}

std::string IcebergSink::Describe() const {
  if (catalog_) {
    return fmt::format("iceberg table {}.{} of {}", fmt::join(options_.namespace_, "."),
                       options_.table, catalog_->Describe());
  }
  return fmt::format("iceberg table {}.{} in {}", fmt::join(options_.namespace_, "."),
                     options_.table, root_);
}

std::optional<SourceOffsets> IcebergSink::HeldOffsets() {
  SourceOffsets out;
  Status read;
  if (table_) {
    read = table_->Refresh();
  } else if (Result<lake::Table> t = LoadTable(); t.ok()) {
    read = Adopt(std::move(*t));  // created by another member meanwhile
  } else if (t.status().code() != StatusCode::kNotFound) {
    read = t.status();  // a store failing is not a missing table
  }
  known_.clear();
  if (!read.ok()) {
    unreadable_ = read;
    return std::nullopt;
  }
  unreadable_.reset();
  if (!table_) return out;
  for (const std::string& topic : options_.topics) {
    std::optional<std::string> json = table_->NewestSummary(OffsetsKey(options_.group_id, topic));
    if (!json) continue;
    nlohmann::json j = nlohmann::json::parse(*json, nullptr, false);
    if (!j.is_object()) continue;
    for (auto it = j.begin(); it != j.end(); ++it) {
      int32_t partition = 0;
      auto [p, ec] = std::from_chars(it.key().data(), it.key().data() + it.key().size(), partition);
      if (ec != std::errc() || !it.value().is_number_integer()) continue;
      out[{topic, partition}] = it.value().get<int64_t>();
    }
  }
  known_ = out;
  return out;
}

Status IcebergSink::ClearStage() {
  // Dropped, not emptied: DuckDB keeps a temporary table's deleted rows in memory (there
  // is no checkpoint to vacuum them), so a DELETE would grow it by every commit's rows.
  if (staged_table_ && conn_ != nullptr)
    RETURN_IF_ERROR(conn_->Execute(fmt::format("DROP TABLE IF EXISTS {}", kIcebergStage)));
  staged_table_ = false;
  staged_rows_ = 0;
  staged_memory_bytes_ = 0;
  return Status::OK();
}

Status IcebergSink::Discard() {
  DropFiles();
  stream_error_.reset();
  RETURN_IF_ERROR(ClearStage());
  pending_.clear();
  return Status::OK();
}

void IcebergSink::DropFiles() {
  if (writer_ != nullptr) writer_->Abandon();
  for (const std::string& path : written_paths_) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  written_.clear();
  written_paths_.clear();
  for (const auto& [location, path] : uploads_) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  uploads_.clear();
}

Result<IcebergSink::Placed> IcebergSink::PlaceDataFile(const std::string& subdir) {
  // The table's data directory: <location>/data, or its write.data.path.
  std::string dir = root_ + "/data";
  if (table_) {
    ASSIGN_OR_RETURN(dir, table_->DataDir());
  }
  if (!subdir.empty()) dir += "/" + subdir;
  const std::string name = lake::NewUuid() + ".parquet";
  Placed out;
  if (remote_) {
    out.path = fmt::format("{}/{}", staging_, name);
    out.location = fmt::format("{}/{}", dir, name);
    uploads_[out.location] = out.path;
    return out;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IOError("cannot create {}: {}", dir, ec.message());
  out.path = fmt::format("{}/{}", dir, name);
  out.location = lake::FileUri(out.path);
  return out;
}

Status IcebergSink::UploadFiles(const std::vector<DataFile>& files) {
  if (!remote_) return Status::OK();
  std::vector<std::pair<std::string, std::string>> todo;
  for (const DataFile& f : files) {
    auto it = uploads_.find(f.file_path);
    if (it == uploads_.end()) {
      return InternalError("{}: data file {} was not staged by this sink", Describe(), f.file_path);
    }
    todo.emplace_back(it->second, f.file_path);
  }
  RETURN_IF_ERROR(lake::UploadAll(todo));  // a staged copy gone is the upload's error
  CrashPoint("iceberg-data-uploaded");
  return Status::OK();
}

Status IcebergSink::StreamFailed(const Status& st) {
  DropFiles();
  stream_error_ = Status(st.code(), fmt::format("{}: writing a data file: {} (the rows written "
                                                "since the last commit are lost; the pipeline "
                                                "re-reads them)",
                                                Describe(), st.message()));
  return *stream_error_;
}

Status IcebergSink::FinishFile() {
  if (writer_ == nullptr || !writer_->writing()) return Status::OK();
  std::string path = writer_->path();
  Result<DataFile> f = writer_->Finish();
  if (!f.ok()) return StreamFailed(f.status());
  written_.push_back(std::move(*f));
  written_paths_.push_back(std::move(path));
  return Status::OK();
}

Status IcebergSink::Stream(duck::Connection& conn, std::string_view table,
                           const std::vector<std::string>& names) {
  if (stream_error_) return *stream_error_;
  const Schema* schema = table_->metadata().CurrentSchema();
  const std::set<std::string> have(names.begin(), names.end());
  std::vector<std::string> columns, field_names;
  for (const NestedField& f : schema->fields) {
    const std::string name = lake::QuoteId(f.name);
    columns.push_back(fmt::format("CAST({} AS {}) AS {}",
                                  have.contains(f.name) ? "b." + name : std::string("NULL"),
                                  lake::DuckTypeOf(f.type), name));
    field_names.push_back(f.name);
  }
  ASSIGN_OR_RETURN(duck::QueryResult rows,
                   conn.Query(fmt::format("SELECT {} FROM {} AS b", fmt::join(columns, ", "),
                                          lake::QuoteId(table))));
  const uint64_t n = rows.row_count();
  if (n == 0) return Status::OK();
  if (writer_ == nullptr) {
    ASSIGN_OR_RETURN(writer_, FileWriter::Create(conn.database()));
  }
  // A new schema (columns added): the file of the old one is finished; readers project
  // each file by its field ids.
  if (writer_->writing() && writer_->schema_id() != schema->schema_id) {
    RETURN_IF_ERROR(FinishFile());
  }
  if (!writer_->writing()) {
    ASSIGN_OR_RETURN(Placed placed, PlaceDataFile(""));
    writer_->Start(*schema, field_names, rows.column_logical_types(), std::move(placed.path),
                   std::move(placed.location));
  }
  if (Status st = writer_->Push(std::move(rows)); !st.ok()) return StreamFailed(st);
  staged_rows_ += static_cast<int64_t>(n);
  return Status::OK();
}

Status IcebergSink::EnsureTable(duck::Connection& conn, std::string_view table) {
  if (table_) return Status::OK();
  ASSIGN_OR_RETURN(duck::QueryResult r,
                   conn.Query(fmt::format("SELECT * FROM {} LIMIT 0", lake::QuoteId(table))));
  std::vector<std::string> names;
  for (size_t i = 0; i < r.column_count(); ++i) names.push_back(r.column_name(i));
  ASSIGN_OR_RETURN(Schema schema, lake::SchemaOfColumns(names, r.column_logical_types()));
  PartitionSpec spec;
  for (const std::string& p : options_.partition_by) {
    ASSIGN_OR_RETURN(PartitionField f, ParsePartition(p, schema));
    f.field_id = lake::kPartitionDataIdStart + static_cast<int32_t>(spec.fields.size());
    // Refused before the table exists: a table whose spec this writer cannot fill could
    // never be committed to.
    const NestedField* source = schema.FindField(f.source_id);
    ASSIGN_OR_RETURN(Type result, f.transform.ResultType(source->type));
    bool writable = f.transform.kind() == lake::TransformKind::kBucket
                        ? !SourceText(source->type, "x").empty()
                        : PartitionSql(f, schema).ok();
    switch (result.id) {
      case lake::TypeId::kBoolean:
      case lake::TypeId::kInt:
      case lake::TypeId::kLong:
      case lake::TypeId::kFloat:
      case lake::TypeId::kDouble:
      case lake::TypeId::kDate:
      case lake::TypeId::kTime:
      case lake::TypeId::kTimestamp:
      case lake::TypeId::kTimestampTz:
      case lake::TypeId::kString:
        break;
      default:
        writable = false;
    }
    if (!writable) {
      return InvalidArgumentError(
          "partition_by {}: the iceberg sink cannot write {} partitions of a {} column (it "
          "writes identity, year, month, day, hour, bucket and truncate of boolean, int, long, "
          "float, double, date, time, timestamp and string columns)",
          p, f.transform.ToString(), source->type.ToString());
    }
    spec.fields.push_back(std::move(f));
  }
  const std::map<std::string, std::string> properties = {{"write.format.default", "parquet"}};
  if (catalog_) {
    ASSIGN_OR_RETURN(lake::Table created,
                     lake::CreateRestTable(catalog_, options_.namespace_, options_.table, schema,
                                           spec, properties));
    return Adopt(std::move(created));
  }
  if (!remote_) {
    std::error_code ec;
    std::filesystem::create_directories(root_ + "/data", ec);
    if (ec) return IOError("cannot create {}/data: {}", root_, ec.message());
  }
  ASSIGN_OR_RETURN(lake::Table created, lake::Table::Create(root_, schema, spec, properties));
  table_.emplace(std::move(created));
  return Status::OK();
}

// The batch's columns against the table's: each must exist (or, with schema_evolution, is
// added as a new optional column) and fit its column without loss.
Status IcebergSink::CheckColumns(duck::Connection& conn, std::string_view table,
                                 std::vector<std::string>* names) {
  ASSIGN_OR_RETURN(duck::QueryResult r,
                   conn.Query(fmt::format("SELECT * FROM {} LIMIT 0", lake::QuoteId(table))));
  std::vector<duck::LogicalType> types = r.column_logical_types();
  for (size_t i = 0; i < r.column_count(); ++i) names->push_back(r.column_name(i));
  const Schema* schema = table_->metadata().CurrentSchema();
  std::vector<std::pair<std::string, Type>> added;
  for (size_t i = 0; i < r.column_count(); ++i) {
    const std::string& name = r.column_name(i);
    const NestedField* field = nullptr;
    for (const NestedField& f : schema->fields) {
      if (f.name == name) field = &f;
    }
    int32_t next = 1;
    ASSIGN_OR_RETURN(Type type, lake::IcebergTypeOf(types[i], name, &next));
    if (field == nullptr) {
      if (!options_.schema_evolution) {
        return InvalidArgumentError(
            "column {} ({}) is not in {}; its columns are fixed (set schema_evolution: true "
            "to add new ones)",
            name, type.ToString(), Describe());
      }
      added.emplace_back(name, std::move(type));
      continue;
    }
    if (!lake::IsSafePromotion(type, field->type)) {
      return InvalidArgumentError(
          "column {}: the batch has {}, the table {}: {} cannot hold it without loss", name,
          type.ToString(), field->type.ToString(), field->type.ToString());
    }
  }
  if (added.empty()) return Status::OK();
  return AddColumns(conn, added);
}

// Schema evolution: the new columns, optional, with fresh ids, as a new current schema
// committed like any other change (a lost race re-reads and re-checks).
Status IcebergSink::AddColumns(duck::Connection& conn,
                               const std::vector<std::pair<std::string, Type>>& columns) {
  // Built again on the new current metadata after a lost race: columns another writer
  // added meanwhile are not added twice.
  auto build = [&](const lake::TableMetadata& base) -> Result<std::vector<lake::TableUpdate>> {
    Schema next = *base.CurrentSchema();
    int32_t id = base.last_column_id;
    for (const auto& [name, type] : columns) {
      bool present = false;
      for (const NestedField& f : next.fields) present = present || f.name == name;
      if (present) continue;
      // The new field's id, then its nested fields', after the table's last.
      Schema wrapper;
      wrapper.fields.push_back(NestedField{0, name, false, type, std::nullopt});
      int32_t fresh = id + 1;
      Schema renumbered = lake::AssignFreshIds(wrapper, &fresh);
      id = fresh - 1;
      next.fields.push_back(std::move(renumbered.fields[0]));
    }
    if (next.fields.size() == base.CurrentSchema()->fields.size()) {
      return std::vector<lake::TableUpdate>();  // someone added them
    }
    next.schema_id = 0;
    for (const Schema& old : base.schemas)
      next.schema_id = std::max(next.schema_id, old.schema_id + 1);
    return std::vector<lake::TableUpdate>{lake::AddSchemaUpdate{next, id},
                                          lake::SetCurrentSchemaUpdate{-1}};
  };
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  Result<bool> committed = table_->CommitUpdates(build, now);
  if (!committed.ok()) {
    return Status(committed.status().code(),
                  fmt::format("{}: adding columns: {}", Describe(), committed.status().message()));
  }
  // The staged rows get the new columns too (NULL).
  if (staged_table_) {
    const Schema* schema = table_->metadata().CurrentSchema();
    ASSIGN_OR_RETURN(duck::QueryResult stage,
                     conn.Query(fmt::format("SELECT * FROM {} LIMIT 0", kIcebergStage)));
    for (const NestedField& f : schema->fields) {
      bool have = false;
      for (size_t i = 0; i < stage.column_count(); ++i)
        have = have || stage.column_name(i) == f.name;
      if (have) continue;
      RETURN_IF_ERROR(conn.Execute(fmt::format("ALTER TABLE {} ADD COLUMN {} {}", kIcebergStage,
                                               lake::QuoteId(f.name), lake::DuckTypeOf(f.type))));
    }
  }
  return Status::OK();
}

Status IcebergSink::Write(duck::Connection& conn, std::string_view table,
                          const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  conn_ = &conn;
  RETURN_IF_ERROR(EnsureTable(conn, table));
  std::vector<std::string> names;
  RETURN_IF_ERROR(CheckColumns(conn, table, &names));
  streams_ = table_->metadata().DefaultSpec()->is_unpartitioned();
  if (streams_) {
    RETURN_IF_ERROR(Stream(conn, table, names));
    Skip(offsets);
    return Status::OK();
  }
  if (!staged_table_) {
    const Schema* schema = table_->metadata().CurrentSchema();
    std::vector<std::string> columns;
    for (const NestedField& f : schema->fields) {
      columns.push_back(fmt::format("{} {}", lake::QuoteId(f.name), lake::DuckTypeOf(f.type)));
    }
    RETURN_IF_ERROR(conn.Execute(fmt::format("CREATE OR REPLACE TEMP TABLE {} ({})", kIcebergStage,
                                             fmt::join(columns, ", "))));
    staged_table_ = true;
  }
  auto in_memory_tables = [&conn]() -> Result<int64_t> {
    ASSIGN_OR_RETURN(
        duck::QueryResult memory,
        conn.Query("SELECT coalesce(sum(memory_usage_bytes + temporary_storage_bytes), 0)::BIGINT "
                   "FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'"));
    return memory.chunk_count() > 0 ? memory.chunk(0).GetInt64(0, 0) : 0;
  };
  if (options_.staged_memory_limit_bytes > 0 && staged_rows_ == 0) {
    // What the database's other in-memory tables (window state, the batch) take: the
    // stage's share is what grows beyond it.
    ASSIGN_OR_RETURN(memory_baseline_, in_memory_tables());
  }
  auto inserted = conn.Query(
      fmt::format("INSERT INTO {} BY NAME SELECT * FROM {}", kIcebergStage, lake::QuoteId(table)));
  if (!inserted.ok()) {
    // Inside a batch transaction that now rolls back, the CREATE above may be undone too:
    // create the stage again next time.
    if (staged_rows_ == 0) staged_table_ = false;
    return inserted.status();
  }
  staged_rows_ += static_cast<int64_t>(inserted->rows_changed());
  if (options_.staged_memory_limit_bytes > 0) {
    ASSIGN_OR_RETURN(int64_t now, in_memory_tables());
    staged_memory_bytes_ = std::max<int64_t>(0, now - memory_baseline_);
  }
  Skip(offsets);
  return Status::OK();
}

void IcebergSink::Skip(const SourceOffsets& offsets) {
  for (const auto& [tp, next] : offsets) {
    int64_t& at = pending_[tp];
    at = std::max(at, next);
  }
}

Result<std::vector<DataFile>> IcebergSink::WriteFiles() {
  const lake::TableMetadata& m = table_->metadata();
  const Schema* schema = m.CurrentSchema();
  const PartitionSpec* spec = m.DefaultSpec();
  std::vector<std::string> columns;
  for (const NestedField& f : schema->fields) columns.push_back("s." + lake::QuoteId(f.name));
  std::vector<DataFile> files;
  if (spec->is_unpartitioned()) {
    std::string select =
        fmt::format("SELECT {} FROM {} AS s", fmt::join(columns, ", "), kIcebergStage);
    ASSIGN_OR_RETURN(Placed placed, PlaceDataFile(""));
    ASSIGN_OR_RETURN(DataFile f,
                     lake::WriteDataFile(*conn_, select, *schema, placed.path, placed.location));
    files.push_back(std::move(f));
    return files;
  }
  // One file per partition tuple. Buckets need Iceberg's murmur3, which DuckDB does not
  // have: per bucket field, a table of each distinct source value's bucket, joined in.
  ASSIGN_OR_RETURN(Type tuple, spec->PartitionType(*schema));
  std::string from = fmt::format("{} AS s", kIcebergStage);
  std::vector<std::string> texts;
  for (size_t i = 0; i < spec->fields.size(); ++i) {
    const PartitionField& p = spec->fields[i];
    const NestedField* source = schema->FindField(p.source_id);
    if (source == nullptr)
      return InternalError("partition source {} is not in the schema", p.source_id);
    if (p.transform.kind() == lake::TransformKind::kBucket) {
      std::string text = SourceText(source->type, "s." + lake::QuoteId(source->name));
      if (text.empty()) {
        return UnimplementedError("the iceberg sink cannot bucket a {} column yet",
                                  source->type.ToString());
      }
      std::string map = fmt::format("sluice_iceberg_bucket_{}", i);
      RETURN_IF_ERROR(conn_->Execute(
          fmt::format("CREATE OR REPLACE TEMP TABLE {} (v VARCHAR, b INTEGER)", map)));
      ASSIGN_OR_RETURN(auto values, conn_->QueryText(fmt::format(
                                        "SELECT DISTINCT {0} FROM {1} AS s WHERE {0} IS NOT NULL",
                                        text, kIcebergStage)));
      std::vector<std::string> rows;
      auto insert = [&]() -> Status {
        if (rows.empty()) return Status::OK();
        Status st =
            conn_->Execute(fmt::format("INSERT INTO {} VALUES {}", map, fmt::join(rows, ", ")));
        rows.clear();
        return st;
      };
      for (const auto& v : values) {
        if (!v[0]) continue;
        ASSIGN_OR_RETURN(lake::Value b,
                         p.transform.Apply(source->type, SourceValue(source->type, *v[0])));
        rows.push_back(fmt::format("({}, {})", duck::QuoteLiteral(*v[0]), b.as_int()));
        if (rows.size() >= 1000) RETURN_IF_ERROR(insert());
      }
      RETURN_IF_ERROR(insert());
      from += fmt::format(" LEFT JOIN {0} AS m{1} ON m{1}.v = {2}", map, i, text);
      texts.push_back(fmt::format("m{}.b::VARCHAR", i));
      continue;
    }
    ASSIGN_OR_RETURN(std::string e, PartitionSql(p, *schema));
    texts.push_back(p.transform.ToString() == "identity" ? ValueText(source->type, e)
                                                         : fmt::format("({})::VARCHAR", e));
  }
  ASSIGN_OR_RETURN(auto tuples, conn_->QueryText(fmt::format("SELECT DISTINCT {} FROM {}",
                                                             fmt::join(texts, ", "), from)));
  for (const auto& values : tuples) {
    std::vector<std::string> where;
    std::vector<std::pair<std::string, lake::avro::Datum>> fields;
    std::string dir;
    for (size_t i = 0; i < texts.size(); ++i) {
      where.push_back(values[i] ? fmt::format("{} = {}", texts[i], duck::QuoteLiteral(*values[i]))
                                : fmt::format("{} IS NULL", texts[i]));
      fields.emplace_back(tuple.fields[i].name, PartitionDatum(tuple.fields[i].type, values[i]));
      dir += fmt::format("{}{}={}", dir.empty() ? "" : "/", PathPart(spec->fields[i].name),
                         values[i] ? PathPart(*values[i]) : "null");
    }
    ASSIGN_OR_RETURN(Placed placed, PlaceDataFile(dir));
    std::string select = fmt::format("SELECT {} FROM {} WHERE {}", fmt::join(columns, ", "), from,
                                     fmt::join(where, " AND "));
    ASSIGN_OR_RETURN(DataFile f,
                     lake::WriteDataFile(*conn_, select, *schema, placed.path, placed.location));
    f.partition = lake::avro::Datum::Record(std::move(fields));
    files.push_back(std::move(f));
  }
  return files;
}

Result<SourceOffsets> IcebergSink::Commit(bool force) {
  if (stream_error_) return *stream_error_;
  if (pending_.empty() && staged_rows_ == 0) return SourceOffsets{};
  auto now = std::chrono::steady_clock::now();
  const int64_t target_rows = std::max<int64_t>(
      1,
      static_cast<int64_t>(static_cast<double>(options_.target_file_size_bytes) / bytes_per_row_));
  bool due = force ||
             now - last_commit_ >= std::chrono::seconds(options_.commit_interval_seconds) ||
             staged_rows_ >= target_rows ||
             (options_.staged_memory_limit_bytes > 0 &&
              staged_memory_bytes_ >= options_.staged_memory_limit_bytes);
  if (!due) return SourceOffsets{};
  if (staged_rows_ > 0 && !streams_ && (conn_ == nullptr || !table_))
    return InternalError("rows staged without a connection");
  if (!table_) {
    // Only skipped batches so far and no table yet: their offsets wait for the first rows.
    return SourceOffsets{};
  }
  // The file being written is finished even when the table was partitioned since (by
  // another writer): its rows are in the offsets committed below.
  RETURN_IF_ERROR(FinishFile());
  std::vector<DataFile> files = written_;
  if (staged_table_ && staged_rows_ > 0) {
    ASSIGN_OR_RETURN(std::vector<DataFile> staged, WriteFiles());
    files.insert(files.end(), staged.begin(), staged.end());
  }
  if (!files.empty()) {
    int64_t bytes = 0, rows = 0;
    for (const DataFile& f : files) {
      bytes += f.file_size_in_bytes;
      rows += f.record_count;
    }
    if (rows > 0)
      bytes_per_row_ = std::max(1.0, static_cast<double>(bytes) / static_cast<double>(rows));
    CrashPoint("iceberg-data-written");
  }
  // As when the table commit fails below: the error ends the attempt, and what was
  // uploaded is an orphan for expiry's sweep.
  RETURN_IF_ERROR(UploadFiles(files));
  const SourceOffsets pending = pending_;
  const std::string group = options_.group_id;
  const SourceOffsets& known = known_;
  const std::optional<Status>& unreadable = unreadable_;
  lake::SummaryFn summary =
      [&pending, &group, &known,
       &unreadable](const lake::TableMetadata& base) -> Result<std::map<std::string, std::string>> {
    // Per topic, the newest entry carried forward with this commit's partitions moved on.
    std::map<std::string, nlohmann::json> by_topic;
    for (const auto& [tp, next] : pending) {
      nlohmann::json& j = by_topic[tp.first];
      if (j.is_null()) {
        std::optional<std::string> old = lake::NewestSummary(base, OffsetsKey(group, tp.first));
        j = old ? nlohmann::json::parse(*old, nullptr, false) : nlohmann::json::object();
        if (!j.is_object()) j = nlohmann::json::object();
      }
      // Our rows continue the table where we found it; if another member of the group
      // wrote this partition since, they overlap with its rows: refuse (the restart
      // resumes from the table).
      const std::string p = std::to_string(tp.second);
      auto k = known.find(tp);
      bool in_table = j.contains(p) && j[p].is_number_integer();
      if (in_table && k == known.end() && unreadable) {
        return FailedPreconditionError(
            "partition {} of {}: the table's offsets could not be read when it was assigned "
            "({}); not committing rows the table may hold already (the restart reads them "
            "again)",
            tp.second, tp.first, unreadable->message());
      }
      if (in_table && (k == known.end() || j[p].get<int64_t>() != k->second)) {
        return FailedPreconditionError(
            "partition {} of {}: the table is at offset {}, written by another member of "
            "group {} since this one took it at {}; not committing rows it already holds",
            tp.second, tp.first, j[p].get<int64_t>(), group,
            k == known.end() ? std::string("none") : std::to_string(k->second));
      }
      j[p] = next;
    }
    std::map<std::string, std::string> out;
    for (const auto& [topic, j] : by_topic) out[OffsetsKey(group, topic)] = j.dump();
    return out;
  };
  Result<int64_t> snapshot = table_->Append(files, summary);
  if (!snapshot.ok()) return snapshot.status();
  written_.clear();
  written_paths_.clear();
  for (const auto& [location, path] : uploads_) {  // staged copies, uploaded
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  uploads_.clear();
  RETURN_IF_ERROR(ClearStage());
  pending_.clear();
  for (const auto& [tp, next] : pending) known_[tp] = next;
  last_commit_ = now;
  return pending;
}

}  // namespace sluice::sinks
