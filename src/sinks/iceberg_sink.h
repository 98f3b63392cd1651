// IcebergSink: appends a pipeline's results to an Iceberg table of a warehouse directory
// (docs/design/0009), exactly once from Kafka. In an unpartitioned table each batch's rows
// go at once into the data file being written: a COPY to Parquet on a thread and DuckDB
// connection of its own reads them as they are pushed (duck::ChunkFeed; docs/design/0023,
// decision 19). A partitioned table's rows are staged in a temporary DuckDB table on the
// pipeline's connection instead. Every commit_interval_seconds (or when the rows would make
// a file of target_file_size_bytes, or at stop) the file is finished, or the staged rows
// become Parquet files (one per partition), and committed in one snapshot whose summary
// records, under
// `sluice.offsets.<group>.<topic>`, the next offset of every partition. The pipeline
// commits those offsets to Kafka only after that (Sink::Defers), and a restarted pipeline
// resumes from the table's (HeldOffsets), so a crash anywhere neither loses nor repeats a
// row.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "duck/logical_type.h"
#include "lake/rest_client.h"
#include "lake/table.h"
#include "sinks/sink.h"

namespace sluice::sinks {

struct IcebergSinkOptions {
  std::string warehouse;  // a local directory (or file:// URI), or s3://bucket/prefix
  // Instead of a warehouse: the table is found, created and committed through this Iceberg
  // REST catalog; its location (local or S3) is the catalog's.
  std::optional<lake::RestCatalogConfig> catalog;
  std::vector<std::string> namespace_;  // at least one level
  std::string table;
  std::string catalog_name;  // for Describe
  int64_t commit_interval_seconds = 60;
  int64_t target_file_size_bytes = int64_t{128} << 20;
  bool schema_evolution = false;
  std::vector<std::string> partition_by;  // "day(ts)", "bucket(16, id)", "city", ...
  std::string group_id;                   // whose offsets the snapshots record
  std::vector<std::string> topics;
  // Staged rows live in the pipeline's DuckDB: a commit is also due once its in-memory
  // tables take this much (0: no bound). The runner passes half the database's
  // memory_limit, so staging never pushes the pipeline into spilling.
  int64_t staged_memory_limit_bytes = 0;
};

class IcebergSink : public Sink {
 public:
  // Loads the table when it exists (its offsets for HeldOffsets); otherwise it is created
  // from the first batch's columns.
  static Result<std::unique_ptr<IcebergSink>> Create(IcebergSinkOptions options);

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override { return Status::OK(); }  // staged; durable at Commit
  bool Defers() const override { return true; }
  Result<SourceOffsets> Commit(bool force) override;
  void Skip(const SourceOffsets& offsets) override;
  Status Discard() override;
  std::optional<SourceOffsets> HeldOffsets() override;
  std::string Describe() const override;

  ~IcebergSink() override;

  // The table's root directory (or S3 location); through a catalog "" until the table is
  // loaded or created.
  const std::string& root() const { return root_; }
  // Whether the rows go straight into the data file being written (an unpartitioned
  // table), rather than a staged table. Known after the first Write; for tests.
  bool streams() const { return streams_; }

  class FileWriter;  // the data file being written (iceberg_sink.cc)

 private:
  Status ClearStage();  // drops the staged rows
  explicit IcebergSink(IcebergSinkOptions options, std::string root);
  Status EnsureTable(duck::Connection& conn, std::string_view table);
  // The batch's columns against the table's; `names` gets the batch's column names.
  Status CheckColumns(duck::Connection& conn, std::string_view table,
                      std::vector<std::string>* names);
  // Streaming: the batch's rows, cast to the table's columns, into the file being written.
  Status Stream(duck::Connection& conn, std::string_view table,
                const std::vector<std::string>& names);
  // Streaming: the file being written finished and kept for the next commit.
  Status FinishFile();
  // Streaming: why the rows since the last commit are lost (the pipeline re-reads them).
  Status StreamFailed(const Status& st);
  // Streaming: the files written and not committed, removed; the file being written too.
  void DropFiles();
  Status AddColumns(duck::Connection& conn,
                    const std::vector<std::pair<std::string, lake::Type>>& columns);
  Result<std::vector<lake::DataFile>> WriteFiles();
  // The table as it is now: loaded from its directory or the catalog; NotFound when there
  // is none yet.
  Result<lake::Table> LoadTable() const;
  // Keeps `table` as the table written to; through a catalog its location becomes root_.
  Status Adopt(lake::Table table);
  // Where a new data file is written (`path`, local) and what the table calls it
  // (`location`): the same file for a local table; for one on S3 a staged file, uploaded
  // at the commit. `subdir`: the partition's directories under data/, or "".
  struct Placed {
    std::string path;
    std::string location;
  };
  Result<Placed> PlaceDataFile(const std::string& subdir);
  // S3: uploads the staged copies of `files` (each must be one this sink staged).
  Status UploadFiles(const std::vector<lake::DataFile>& files);

  IcebergSinkOptions options_;
  std::shared_ptr<const lake::RestCatalogClient> catalog_;  // with options_.catalog
  std::string root_;
  std::optional<lake::Table> table_;
  duck::Connection* conn_ = nullptr;  // the pipeline's, from Write
  bool staged_table_ = false;
  int64_t staged_rows_ = 0;
  int64_t staged_memory_bytes_ = 0;  // DuckDB's in-memory tables grown since the stage began
  int64_t memory_baseline_ = 0;      // ... and what they took then
  double bytes_per_row_ = 64;        // Parquet bytes a row took in the last file written
  SourceOffsets pending_;            // offsets of what is staged (or skipped) since the last commit
  // Per partition, the table's offset where our staged rows continue (from HeldOffsets at
  // assignment, then our own commits); a partition absent was not in the table. A commit
  // whose base has moved one of them was overtaken by another writer: refused.
  SourceOffsets known_;
  // Why the table's offsets could not be read when partitions were last assigned: then
  // known_ is empty and no commit over rows the table may hold passes the check above
  // (the pipeline would otherwise resume from the group's commit, which may lag).
  std::optional<Status> unreadable_;
  std::chrono::steady_clock::time_point last_commit_;
  // Streaming (an unpartitioned table).
  bool streams_ = false;
  std::unique_ptr<FileWriter> writer_;   // made at the first Write
  std::vector<lake::DataFile> written_;  // finished, not committed yet
  std::vector<std::string> written_paths_;
  std::optional<Status> stream_error_;  // the rows since the last commit are lost
  // On S3 (remote_): the local directory data files are written in before their upload,
  // and the staged files not committed yet, by their location.
  bool remote_ = false;
  std::string staging_;
  std::map<std::string, std::string> uploads_;  // location -> staged path
};

}  // namespace sluice::sinks
