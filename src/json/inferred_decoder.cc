// InferredDecoder: a batch's schema inferred from its messages (infer.h), the table or view
// made for it, then the rows (json_decoder.h).
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include "base/fork_join.h"
#include "duck/chunk_view.h"
#include "duck/data_chunk.h"
#include "json/chunk_builder.h"
#include "json/filler.h"
#include "json/infer.h"
#include "json/json_decoder.h"
#include "json/reader.h"

namespace sluice::json {

namespace od = simdjson::ondemand;
using duck::Vector;
using kafka::client::Message;

namespace {

constexpr std::string_view kKafkaColumns[] = {"kafka_topic", "kafka_partition", "kafka_offset",
                                              "kafka_timestamp", "kafka_key"};

InferLimits LimitsOf(const InferredOptions& o) {
  return {.max_columns = o.max_columns,
          .max_struct_fields = o.max_struct_fields,
          .max_struct_depth = o.max_struct_depth,
          .drop_extra_columns = false,
          .reserved = kKafkaColumns,
          .types = InferredTypes::kNested};
}

// Fills rows from messages[begin, end) that pass 1 found good (`good`) into `b`, the JSON
// columns through `filler` and the kafka_ columns (from column `k` on) from each message;
// `flush` takes each full chunk (and the last). Messages that do not fill go to `errors`.
Status FillRange(JsonReader& reader, Filler& filler, ChunkBuilder& b, size_t k,
                 std::span<const Message> messages, const std::vector<uint8_t>& good, size_t begin,
                 size_t end, const std::function<Status()>& flush, std::vector<DecodeError>* errors,
                 size_t* rows) {
  od::document doc;
  od::object obj;
  std::string reason;
  // The kafka_ columns of the chunk being built, bound again whenever the chunk changes.
  struct {
    Vector topic, key;
    int32_t* partition;
    int64_t *offset, *timestamp;
    uint64_t *timestamp_valid, *key_valid;
  } kc;
  auto bind = [&] {
    duck::DataChunk& chunk = b.chunk();
    kc.topic = chunk.column(k);
    kc.partition = chunk.column(k + 1).data<int32_t>();
    kc.offset = chunk.column(k + 2).data<int64_t>();
    kc.timestamp = chunk.column(k + 3).data<int64_t>();
    kc.timestamp_valid = chunk.column(k + 3).validity();
    kc.key = chunk.column(k + 4);
    kc.key_valid = kc.key.validity();
  };
  bind();
  for (size_t i = begin; i < end; ++i) {
    if (!good[i]) continue;
    const Message& m = messages[i];
    if (!OpenObject(reader, m.value, &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    filler.set_document(&doc);
    filler.error().Clear();
    b.MarkRow();
    if (!filler.FillObject(obj, b.slots(), b.sorted(), b.rows(), 0)) {
      errors->push_back({i, filler.error().Reason()});
      b.RollbackRow();
      continue;
    }
    const uint64_t row = b.rows();
    kc.topic.AssignString(row, m.topic);
    kc.partition[row] = m.partition;
    kc.offset[row] = m.offset;
    if (m.timestamp_ms == -1) {
      Vector::SetInvalid(kc.timestamp_valid, row);
    } else {
      kc.timestamp[row] = m.timestamp_ms * 1000;
      Vector::SetValid(kc.timestamp_valid, row);
    }
    if (m.key.data() == nullptr) {
      Vector::SetInvalid(kc.key_valid, row);
    } else {
      kc.key.AssignString(row, m.key);
      Vector::SetValid(kc.key_valid, row);
    }
    b.CommitRow();
    ++*rows;
    if (b.full()) {
      RETURN_IF_ERROR(flush());
      bind();
    }
  }
  if (b.rows() > 0) RETURN_IF_ERROR(flush());
  reader.Shrink();
  return Status::OK();
}

// A builder of `types`, the first `json_columns` filled from JSON under `names`.
Result<std::unique_ptr<ChunkBuilder>> NewBuilder(const std::vector<duck::LogicalType>& types,
                                                 const std::vector<std::string>& names,
                                                 size_t json_columns) {
  std::vector<Slot> slots;
  for (size_t i = 0; i < json_columns; ++i) {
    slots.push_back(BuildSlot(types[i], names[i], types[i].ToSql()));
  }
  ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
  return std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
}

// Pass 1 over messages[begin, end): each message checked and merged into `inferrer`'s
// schema; `good` marks those that were, the rest go to `errors` with the reason.
void InferRange(JsonReader& reader, Filler& validator, Inferrer& inferrer,
                std::span<const Message> messages, size_t begin, size_t end,
                std::vector<uint8_t>& good, std::vector<DecodeError>* errors) {
  od::document doc;
  od::object obj;
  std::string reason;
  for (size_t i = begin; i < end; ++i) {
    if (!OpenObject(reader, messages[i].value, &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    validator.set_document(&doc);
    if (!inferrer.ObserveMessage(obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    if (!CloseDocument(&doc, &reason)) {
      inferrer.Undo();
      errors->push_back({i, std::move(reason)});
      continue;
    }
    good[i] = 1;
  }
}

// Waits until `a` no longer holds `from` and returns what it holds: a short spin first (the
// other side is usually a merge of small trees away), then asleep.
template <typename T>
T AwaitChange(std::atomic<T>& a, T from) {
  for (int spins = 0; spins < 256; ++spins) {
    T now = a.load(std::memory_order_acquire);
    if (now != from) return now;
    if (spins >= 64) std::this_thread::yield();
  }
  a.wait(from, std::memory_order_acquire);
  return a.load(std::memory_order_acquire);
}

// One part of pass 1 (the schema) inferred on a helper thread (InferredOptions::threads).
struct InferPart {
  JsonReader reader;
  Filler filler{true};
  Inferrer inferrer;
  std::vector<DecodeError> errors;
  explicit InferPart(const InferredOptions& o) : inferrer(LimitsOf(o), &filler) {}
};

// One part of an in-memory batch filled on a helper thread (InferredOptions::threads).
struct FillPart {
  JsonReader reader;
  Filler filler{true};
  std::unique_ptr<ChunkBuilder> builder;
  std::unique_ptr<ChunkPool> pool;
  std::vector<DecodeError> errors;
  size_t rows = 0;
  Status status;
};

}  // namespace

struct InferredDecoder::Impl {
  duck::Connection* conn;
  InferredOptions options;
  JsonReader reader;
  Filler filler{true};
  Inferrer inferrer;
  std::string schema_sql;
  std::string built_for;  // schema_sql the builder was made for
  std::unique_ptr<ChunkBuilder> builder;
  size_t json_columns = 0;
  // In memory (options.in_memory): the batch's chunks and their view.
  std::unique_ptr<ChunkPool> pool;
  std::unique_ptr<duck::ChunkView> view;
  // With options.threads > 1: the helpers, and the parts past the first of pass 1 (the
  // schema) and, in memory, of pass 2 (the rows).
  std::vector<std::unique_ptr<InferPart>> infer_parts;
  std::vector<std::unique_ptr<FillPart>> parts;
  std::unique_ptr<ForkJoin> helpers;

  explicit Impl(InferredOptions o) : options(std::move(o)), inferrer(LimitsOf(options), &filler) {}
};

InferredDecoder::InferredDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InferredDecoder::~InferredDecoder() = default;
const std::string& InferredDecoder::schema_sql() const { return impl_->schema_sql; }

Result<std::unique_ptr<InferredDecoder>> InferredDecoder::Create(duck::Connection& conn,
                                                                 InferredOptions options) {
  if (options.table.empty()) return InvalidArgumentError("an inferred batch needs a table name");
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->conn = &conn;
  if (impl->options.threads > 1) {
    for (size_t i = 1; i < impl->options.threads; ++i)
      impl->infer_parts.push_back(std::make_unique<InferPart>(impl->options));
    impl->helpers = std::make_unique<ForkJoin>(impl->infer_parts.size(), "sluice-decode");
  }
  return std::unique_ptr<InferredDecoder>(new InferredDecoder(std::move(impl)));
}

Result<size_t> InferredDecoder::Decode(std::span<const Message> messages,
                                       std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  d.inferrer.Reset();
  std::vector<uint8_t> good(messages.size(), 0);
  std::optional<duck::Appender> app;
  // Pass 1's end: the parts' schemas merged in order (or, where the column limit made the
  // order matter, the batch inferred again in one pass), then the table or view made for
  // the schema and the builders for its rows.
  auto merge_and_set_up = [&](size_t infer_parts) -> Status {
    bool merged = true;
    for (size_t p = 1; p < infer_parts && merged; ++p) {
      merged = d.inferrer.Merge(d.infer_parts[p - 1]->inferrer);
    }
    if (merged) {
      for (size_t p = 1; p < infer_parts; ++p) {
        for (DecodeError& e : d.infer_parts[p - 1]->errors) errors->push_back(std::move(e));
      }
    } else {
      errors->clear();
      std::fill(good.begin(), good.end(), 0);
      d.inferrer.Reset();
      InferRange(d.reader, d.filler, d.inferrer, messages, 0, messages.size(), good, errors);
    }
    return SetUp(&app);
  };
  // Pass 2's part `p` of `parts` (the first on the caller's thread's reader and builder).
  size_t appended = 0;
  Status first;
  auto fill_part = [&](size_t p, size_t parts) {
    const size_t begin = messages.size() * p / parts;
    const size_t end = messages.size() * (p + 1) / parts;
    if (p == 0) {
      ChunkBuilder& b = *d.builder;
      first = FillRange(
          d.reader, d.filler, b, d.json_columns, messages, good, begin, end,
          [&] { return d.pool->Hold(b); }, errors, &appended);
      return;
    }
    FillPart& part = *d.parts[p - 1];
    part.errors.clear();
    part.rows = 0;
    part.status = FillRange(
        part.reader, part.filler, *part.builder, d.json_columns, messages, good, begin, end,
        [&] { return part.pool->Hold(*part.builder); }, &part.errors, &part.rows);
  };

  const size_t parts = PartsFor(messages.size(), d.infer_parts.size());
  size_t fill_parts = 1;  // pass 2's parts, when they ran with pass 1's
  if (parts == 1) {
    InferRange(d.reader, d.filler, d.inferrer, messages, 0, messages.size(), good, errors);
    RETURN_IF_ERROR(SetUp(&app));
  } else {
    // A large batch in consecutive parts, once handed to the helpers: each part infers
    // its range's schema; the caller's part then merges them and makes the table while
    // the helpers wait (briefly: a merge of small trees); in memory each part then fills
    // its range's rows, so the batch costs one hand-off, not two (a second one cost more
    // than it saved on two busy cores: docs/design/0023 decision 21).
    // In memory the helpers wait for the view and builders; for a table they are done
    // after pass 1 (the rows are appended on this thread).
    const bool fill_together = d.options.in_memory;
    SLUICE_ASSERT(parts <= d.helpers->helpers() + 1);  // each part on a thread of its own
    std::atomic<size_t> inferred{0};                   // helpers done with pass 1
    std::atomic<int> go{0};  // 0: wait; 1: fill; 2: done (pass 2 on the caller, or failed)
    Status set_up;
    d.helpers->Run(parts, [&](size_t p) {
      const size_t begin = messages.size() * p / parts;
      const size_t end = messages.size() * (p + 1) / parts;
      if (p > 0) {
        InferPart& part = *d.infer_parts[p - 1];
        part.inferrer.Reset();
        part.errors.clear();
        InferRange(part.reader, part.filler, part.inferrer, messages, begin, end, good,
                   &part.errors);
        part.reader.Shrink();
        inferred.fetch_add(1, std::memory_order_acq_rel);
        inferred.notify_one();
        if (!fill_together) return;
        if (AwaitChange(go, 0) == 1) fill_part(p, parts);
        return;
      }
      // The helpers are let go however this part ends.
      struct Release {
        std::atomic<int>& go;
        ~Release() {
          int waiting = 0;
          if (go.compare_exchange_strong(waiting, 2, std::memory_order_release)) go.notify_all();
        }
      } release{go};
      InferRange(d.reader, d.filler, d.inferrer, messages, begin, end, good, errors);
      for (size_t seen; (seen = inferred.load(std::memory_order_acquire)) < parts - 1;) {
        AwaitChange(inferred, seen);
      }
      set_up = merge_and_set_up(parts);
      const bool together = set_up.ok() && fill_together;
      go.store(together ? 1 : 2, std::memory_order_release);
      go.notify_all();
      if (together) fill_part(0, parts);
    });
    RETURN_IF_ERROR(set_up);
    if (fill_together) fill_parts = parts;
  }
  if (fill_parts == 1) {
    if (app) {
      ChunkBuilder& b = *d.builder;
      auto flush = [&]() -> Status {
        RETURN_IF_ERROR(b.Finish());
        RETURN_IF_ERROR(app->Append(b.chunk()));
        b.Reset();
        return Status::OK();
      };
      RETURN_IF_ERROR(FillRange(d.reader, d.filler, b, d.json_columns, messages, good, 0,
                                messages.size(), flush, errors, &appended));
    } else {
      fill_part(0, 1);
    }
  }
  RETURN_IF_ERROR(first);
  for (size_t p = 1; p < fill_parts; ++p) {
    FillPart& part = *d.parts[p - 1];
    RETURN_IF_ERROR(part.status);
    appended += part.rows;
    for (DecodeError& e : part.errors) errors->push_back(std::move(e));
  }
  if (app) {
    RETURN_IF_ERROR(app->Flush());
  } else {
    d.pool->Trim();
    std::vector<const duck::DataChunk*> chunks = d.pool->batch();
    for (size_t p = 1; p < fill_parts; ++p) {
      d.parts[p - 1]->pool->Trim();
      for (const duck::DataChunk* c : d.parts[p - 1]->pool->batch()) chunks.push_back(c);
    }
    d.view->SetChunks(std::move(chunks));
  }
  d.reader.Shrink();
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return appended;
}

// The table (or in memory the view) for the schema pass 1 inferred, and the builders.
Status InferredDecoder::SetUp(std::optional<duck::Appender>* app) {
  Impl& d = *impl_;
  const InferNode& root = d.inferrer.root();
  std::string cols;
  for (size_t i = 0; i < root.names.size(); ++i) {
    cols += fmt::format("{} {}, ", duck::QuoteIdentifier(root.names[i]),
                        root.fields[i]->Sql(InferredTypes::kNested));
  }
  cols +=
      "\"kafka_topic\" VARCHAR, \"kafka_partition\" INTEGER, \"kafka_offset\" BIGINT, "
      "\"kafka_timestamp\" TIMESTAMPTZ, \"kafka_key\" BLOB";
  d.schema_sql = cols;
  std::vector<duck::LogicalType> types;
  const bool rebuild = !d.builder || d.built_for != d.schema_sql;
  // Set again only once everything below is made for the schema: a failure half-way must
  // not leave builders of one schema beside a view of another for the next batch.
  if (rebuild) d.built_for.clear();
  if (d.options.in_memory) {
    // The previous batch's chunks are about to be reused or freed: the view lets go first.
    if (d.view) d.view->SetChunks({});
    if (rebuild) {
      std::vector<std::string> names = root.names;
      for (size_t i = 0; i < root.names.size(); ++i)
        types.push_back(root.fields[i]->Type(InferredTypes::kNested));
      for (std::string_view k : kKafkaColumns) names.emplace_back(k);
      types.push_back(duck::LogicalType::Varchar());
      types.push_back(duck::LogicalType::Integer());
      types.push_back(duck::LogicalType::BigInt());
      types.push_back(duck::LogicalType::TimestampTz());
      types.push_back(duck::LogicalType::Blob());
      if (d.view) {
        RETURN_IF_ERROR(d.view->SetColumns(names, types));
      } else {
        ASSIGN_OR_RETURN(d.view, duck::ChunkView::Create(*d.conn, d.options.table, names, types));
      }
      d.pool = ChunkPool::Of(types);
      if (d.parts.empty()) {
        for (size_t i = 1; i < d.options.threads; ++i) {
          d.parts.push_back(std::make_unique<FillPart>());
        }
      }
      for (auto& part : d.parts) {
        ASSIGN_OR_RETURN(part->builder, NewBuilder(types, root.names, root.names.size()));
        part->pool = ChunkPool::Of(types);
      }
    } else {
      d.pool->Recycle();
      for (auto& part : d.parts) part->pool->Recycle();
    }
  } else {
    RETURN_IF_ERROR(d.conn->Execute(fmt::format("CREATE OR REPLACE TABLE {} ({})",
                                                duck::QuoteIdentifier(d.options.table), cols)));
    ASSIGN_OR_RETURN(*app, duck::Appender::Open(*d.conn, d.options.table));
    if (rebuild) types = (*app)->ColumnTypes();
  }
  if (rebuild) {
    d.builder.reset();
    ASSIGN_OR_RETURN(d.builder, NewBuilder(types, root.names, root.names.size()));
    d.built_for = d.schema_sql;
    d.json_columns = root.names.size();
  }
  return Status::OK();
}

}  // namespace sluice::json
