// NoopSink: takes every batch and keeps nothing (sqlflow's `sink.type: noop`), for
// benchmarks and for pipelines whose SQL has its own side effects.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sinks/sink.h"

namespace sluice::sinks {

// Nothing is stored, so every Flush is trivially "durable": the pipeline commits the
// offsets of each batch as soon as it is written. Same lifecycle as Sink.
class NoopSink final : public Sink {
 public:
  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override {
    return Status::OK();
  }
  Status Flush() override { return Status::OK(); }
  std::string Describe() const override { return "noop"; }
};

}  // namespace sluice::sinks
