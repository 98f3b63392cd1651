// ConsoleSink: sqlflow's `sink.type: console`. Each row of a batch is written as one JSON
// object on its own line (rendered by DuckDB's to_json: every type, nested ones and NULLs
// included) to a stdio stream, stdout in production.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/sink.h"

namespace sluice::sinks {

struct ConsoleSinkOptions {
  // Where the lines go; not owned, must outlive the sink. nullptr means stdout.
  std::FILE* out = nullptr;
};

// Write renders the batch and hands the lines to stdio; Flush fflushes the stream. A
// console has no storage: "durable" here means handed to the operating system (the
// terminal, a pipe, or the file stdout is redirected to, without an fsync). Owned by the
// pipeline's thread, as every Sink.
class ConsoleSink final : public Sink {
 public:
  explicit ConsoleSink(ConsoleSinkOptions options = {});

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override;
  std::string Describe() const override { return "console"; }

 private:
  std::FILE* out_;
};

}  // namespace sluice::sinks
