// COPY ... TO STDOUT's data: the rows of a result in Postgres's text, CSV or binary COPY
// format, each row one CopyData message (docs/design/0010-query-server.md, decision 27).
// Values are the text (or binary) forms a SELECT sends (pg_types.h), so `\copy` writes
// what psql shows.
//
//   CopyOutWriter w(options, encoders, names);
//   w.Start(out);                         // CopyOutResponse, then the header row if asked
//   w.AppendRow(columns, row, out);       // per row: one CopyData
//   w.Finish(out);                        // the binary trailer, CopyDone
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "query/pg_types.h"
#include "query/sql_text.h"

namespace sluice::query {

// One value in the text format: backslash escapes for backslash, the delimiter and the
// control characters Postgres escapes (\b \f \n \r \t \v); other bytes as they are.
void AppendCopyText(std::string_view value, char delimiter, std::string& out);
// One value in CSV: quoted when `force`, when it holds the delimiter, the quote, CR or
// LF, when it equals the NULL string, or when it is `\.` alone on its line
// (`only_column`); inside quotes the quote and escape characters are escaped.
void AppendCopyCsv(std::string_view value, const CopyOptions& options, bool force, bool only_column,
                   std::string& out);

// Writes one COPY TO STDOUT. Owned by the session thread running it.
class CopyOutWriter {
 public:
  // `encoders` and `names` are the result's columns. InvalidArgument (42P10) when a
  // FORCE_QUOTE column is not one of `names` (compared without case).
  static Result<CopyOutWriter> Make(const CopyOptions& options, std::vector<ColumnEncoder> encoders,
                                    std::vector<std::string> names);
  // CopyOutResponse, and the header line (text, CSV) when asked.
  void Start(std::string& out);
  // The row `row` of `columns` (one vector per column) as one CopyData message.
  void AppendRow(const std::vector<duck::Vector>& columns, uint64_t row, std::string& out);
  // The binary trailer (and the header, when no row came), then CopyDone.
  void Finish(std::string& out);

 private:
  CopyOutWriter(const CopyOptions& options, std::vector<ColumnEncoder> encoders,
                std::vector<std::string> names)
      : options_(options), encoders_(std::move(encoders)), names_(std::move(names)) {}
  void AppendField(std::string_view value, size_t column, std::string& out) const;

  CopyOptions options_;
  std::vector<ColumnEncoder> encoders_;
  std::vector<std::string> names_;
  std::vector<bool> force_quote_;  // per column
  bool binary_header_pending_ = false;
  std::string field_;  // one value's DataRow form, reused
};

}  // namespace sluice::query
