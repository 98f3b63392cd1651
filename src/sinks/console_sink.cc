#include "sinks/console_sink.h"

#include <cerrno>

#include "sinks/duck_rows.h"

namespace sluice::sinks {

ConsoleSink::ConsoleSink(ConsoleSinkOptions options)
    : out_(options.out != nullptr ? options.out : stdout) {}

Status ConsoleSink::Write(duck::Connection& conn, std::string_view table,
                          const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  ASSIGN_OR_RETURN(duck::QueryResult rows, RowsAsJson(conn, table));
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk c = rows.chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      std::string_view line = c.GetString(0, r);
      if (std::fwrite(line.data(), 1, line.size(), out_) != line.size() ||
          std::fputc('\n', out_) == EOF) {
        return ErrnoError("console sink: write", "the output stream", errno);
      }
    }
  }
  return Status::OK();
}

Status ConsoleSink::Flush() {
  if (std::fflush(out_) != 0) return ErrnoError("console sink: flush", "the output stream", errno);
  return Status::OK();
}

}  // namespace sluice::sinks
