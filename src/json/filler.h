// Writing JSON values into bound Slots (internal to src/json): the value conversions of
// docs/design/0005-json-decoding.md ("Type mapping"), in two modes. Strict (the pipeline):
// a value that does not fit its column fails the whole message with a reason. Lenient
// (topic()): such a value is NULL and the rest of the message is still read; only JSON
// kinds convert (no "42" into an integer, no "true" into a boolean), integers take numbers
// without a fraction only, and JSON text is minified.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "json/reader.h"
#include "json/slot.h"

namespace sluice::json {

// Why a value failed: the problem, the type it was meant for, and the key path (built as
// the recursion unwinds, innermost first).
struct FillError {
  std::string problem;
  std::string type_name;
  std::vector<std::string> path;

  void Clear() {
    problem.clear();
    type_name.clear();
    path.clear();
  }
  std::string Reason() const;
};

enum class FillMode : uint8_t { kStrict, kLenient };

// Writes JSON values into bound Slots (the conversions are in filler.cc). One per decoder,
// owned by the decoder's thread.
class Filler {
 public:
  explicit Filler(bool case_insensitive, FillMode mode = FillMode::kStrict,
                  size_t max_depth = kMaxJsonDepth)
      : case_insensitive_(case_insensitive),
        lenient_(mode == FillMode::kLenient),
        max_depth_(static_cast<int>(max_depth)) {}

  FillError& error() { return error_; }
  void set_document(simdjson::ondemand::document* doc) { doc_ = doc; }
  bool lenient() const { return lenient_; }
  int max_depth() const { return max_depth_; }

  // Fills `fields` (a table's columns or a struct's fields) at `row` from `obj`: missing
  // keys become NULL, unknown keys are checked and skipped. Lenient: a value that does not
  // fit is NULL; the message must have been validated first (ValidateObject), as unknown
  // keys are skipped unchecked.
  bool FillObject(simdjson::ondemand::object obj, std::vector<Slot>& fields,
                  const std::vector<std::pair<std::string, uint32_t>>& sorted, uint64_t row,
                  int depth);

  // Walks a value the decoder does not store, so that invalid JSON inside it is still
  // caught (simdjson's on-demand API skips unread values without validating them).
  // Lenient: a number simdjson cannot read (an integer past 64 bits, a double past its
  // range) is invalid too, as simdjson's DOM parser has it.
  bool SkipValidated(simdjson::ondemand::value& v, int depth);

  // Lenient: the whole object validated as SkipValidated does, for a second pass to fill.
  bool ValidateObject(simdjson::ondemand::object obj);

  // NULL for `s` and, for a struct, its fields (DuckDB expects a NULL struct's children to
  // be NULL too); an empty entry for a list.
  void SetNull(Slot& s, uint64_t row);

  // Points a slot (and its struct fields) at `v`'s current buffers; a nested list keeps its
  // own child state (its child buffer does not move with its parent's).
  static void Refresh(Slot& s, duck::Vector v);

 private:
  bool case_insensitive_;
  bool lenient_;
  int max_depth_;
  uint64_t stamp_ = 0;
  simdjson::ondemand::document* doc_ = nullptr;
  FillError error_;
  std::string minified_;  // lenient: the buffer minified JSON text is written to, reused
};

}  // namespace sluice::json
