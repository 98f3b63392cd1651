// Schema inference (internal to src/json): each message's values merged into a tree of
// what every key, struct field and list element holds, and the tree's column types under
// one of the InferredTypes rules. The pipeline's InferredDecoder and topic()'s
// InferColumns both run this code; docs/design/0005-json-decoding.md ("Inferred schemas").
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duck/logical_type.h"
#include "json/filler.h"
#include "json/lenient_decoder.h"

namespace sluice::json {

// What a batch's values at one place (a top-level key, a struct field, list elements) hold.
struct InferNode {
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kObject, kArray, kText };
  Kind kind = Kind::kNull;
  bool saw_nested = false;         // an object or array was seen here (kFlat: JSON)
  bool saw_fraction = false;       // a number that is not an integer within BIGINT (kFlat: DOUBLE)
  std::vector<std::string> names;  // kObject: fields in first-seen order
  std::vector<std::unique_ptr<InferNode>> fields;
  std::unique_ptr<InferNode> element;  // kArray

  // The field named `key` exactly, else ignoring ASCII case; -1 when none.
  int Find(std::string_view key) const;
  // SQL type, as in CREATE TABLE.
  std::string Sql(InferredTypes types) const;
  // The same type as Sql(), built directly (the in-memory path creates no table).
  duck::LogicalType Type(InferredTypes types) const;
};

struct InferLimits {
  size_t max_columns = 1000;  // distinct top-level keys
  size_t max_struct_fields = 1000;
  int max_struct_depth = 32;
  // Past max_columns: true leaves new keys out, false refuses the message.
  bool drop_extra_columns = false;
  // Top-level keys left out (compared ignoring ASCII case).
  std::span<const std::string_view> reserved;
  InferredTypes types = InferredTypes::kNested;
};

// Merges each message's values into the InferNode tree. Changes made by a message that
// later turns out invalid are undone, so a bad message leaves no trace in the schema.
// `validator` checks what is skipped (strict or lenient, as the decoder reads). One per
// decoder, owned by its thread.
class Inferrer {
 public:
  Inferrer(InferLimits limits, Filler* validator) : limits_(limits), validator_(validator) {
    Reset();
  }

  const InferNode& root() const { return root_; }
  void Reset();

  // Merges one message's object; false (and why) when the message is refused.
  bool ObserveMessage(simdjson::ondemand::object obj, std::string* reason);
  // Undoes the last ObserveMessage (the message turned out invalid after it).
  void Undo();

  // A batch inferred in parts (InferredOptions::threads): merges what another inferrer with
  // the same limits saw over the messages after this one's into this tree, as if this one
  // had gone on observing them: kinds joined (a conflict is text), flags or'ed, fields in
  // first-seen order; a struct that grows past max_struct_fields becomes text, as in one
  // pass. False where the order could matter, and the caller then infers the batch again
  // in one pass: the merged top level would have more than max_columns keys, or `later`
  // refused a message for a reason an earlier message could have taken away (the column
  // limit; a number out of DOUBLE's range, which one pass does not read once the key is
  // text).
  bool Merge(const Inferrer& later);

 private:
  struct Change {
    InferNode* node;
    InferNode::Kind kind;
    bool saw_nested, saw_fraction;
    size_t field_count;
  };

  void Log(InferNode& n) {
    undo_.push_back({&n, n.kind, n.saw_nested, n.saw_fraction, n.names.size()});
  }
  void SetKind(InferNode& n, InferNode::Kind k) {
    Log(n);
    n.kind = k;
  }
  bool IsReserved(std::string_view key) const;
  bool ObserveFields(InferNode& n, simdjson::ondemand::object obj, int depth, bool top);
  bool Observe(InferNode& n, simdjson::ondemand::value& v, int depth);
  bool ObserveNumber(InferNode& n, simdjson::ondemand::value& v);
  bool Path(std::string_view key);
  bool Syntax(simdjson::error_code e);
  bool MergeNode(InferNode& n, const InferNode& from, bool top);

  InferLimits limits_;
  Filler* validator_;
  InferNode root_;
  std::vector<Change> undo_;
  std::string top_error_;
  // A message was refused for a reason that depends on the messages before it.
  bool refused_by_order_ = false;
};

}  // namespace sluice::json
