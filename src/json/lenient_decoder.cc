// The lenient side of the JSON decoder (lenient_decoder.h): a message is validated whole
// first, as simdjson's DOM parser would (so a bad message is NULL in every column, not in
// some), then read again to fill the columns, where a value that does not fit is NULL.
#include "json/lenient_decoder.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "json/filler.h"
#include "json/infer.h"
#include "json/reader.h"
#include "json/slot.h"

namespace sluice::json {

namespace od = simdjson::ondemand;

namespace {

// Opens `value` as an object and validates all of it; false when it is not a readable
// JSON object. On true, `doc` is rewound and `*obj` is the object again.
bool OpenValidated(JsonReader& reader, Filler& filler, std::string_view value, od::document* doc,
                   od::object* obj) {
  std::string reason;
  filler.error().Clear();
  if (!OpenObject(reader, value, doc, obj, &reason)) return false;
  filler.set_document(doc);
  if (!filler.ValidateObject(*obj) || !CloseDocument(doc, &reason)) return false;
  doc->rewind();
  return doc->get_object().get(*obj) == simdjson::SUCCESS;
}

}  // namespace

std::vector<Column> InferColumns(std::span<const std::string> samples,
                                 const InferColumnsOptions& options) {
  JsonReader reader(kLenientMaxDepth);
  Filler validator(/*case_insensitive=*/true, FillMode::kLenient, kLenientMaxDepth);
  Inferrer inferrer({.max_columns = options.max_columns,
                     .drop_extra_columns = true,
                     .reserved = options.reserved,
                     .types = options.types},
                    &validator);
  od::document doc;
  od::object obj;
  std::string reason;
  for (const std::string& sample : samples) {
    if (!OpenObject(reader, sample, &doc, &obj, &reason)) continue;
    validator.set_document(&doc);
    if (!inferrer.ObserveMessage(obj, &reason)) continue;
    if (!CloseDocument(&doc, &reason)) inferrer.Undo();
  }
  std::vector<Column> out;
  const InferNode& root = inferrer.root();
  for (size_t i = 0; i < root.names.size(); ++i) {
    out.push_back({root.names[i], root.fields[i]->Type(options.types)});
  }
  return out;
}

struct LenientDecoder::Impl {
  JsonReader reader{kLenientMaxDepth};
  Filler filler{/*case_insensitive=*/true, FillMode::kLenient, kLenientMaxDepth};
  std::vector<Slot> slots;
  std::vector<std::pair<std::string, uint32_t>> sorted;
  std::vector<Slot*> lists;  // every LIST slot, at any depth
  od::document doc;

  void CollectLists(Slot& s) {
    if (s.kind == Kind::kList) lists.push_back(&s);
    for (Slot& c : s.children) CollectLists(c);
  }
};

LenientDecoder::LenientDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LenientDecoder::~LenientDecoder() = default;

Result<std::unique_ptr<LenientDecoder>> LenientDecoder::Create(std::span<const Column> columns) {
  auto impl = std::make_unique<Impl>();
  for (const Column& c : columns) {
    if (!IsDirect(c.type)) {
      return InvalidArgumentError("column {}: type {} cannot be decoded from JSON directly", c.name,
                                  c.type.ToSql());
    }
    impl->slots.push_back(BuildSlot(c.type, c.name, c.type.ToSql()));
  }
  for (Slot& s : impl->slots) IndexTree(s);
  IndexFields(impl->slots, &impl->sorted);
  // Collected after the vector is complete: the pointers stay valid.
  for (Slot& s : impl->slots) impl->CollectLists(s);
  return std::unique_ptr<LenientDecoder>(new LenientDecoder(std::move(impl)));
}

void LenientDecoder::Bind(std::span<const duck::Vector> vectors) {
  SLUICE_ASSERT(vectors.size() == impl_->slots.size());
  for (Slot* l : impl_->lists) {
    l->list_size = 0;
    l->list_capacity = 0;
  }
  for (size_t i = 0; i < vectors.size(); ++i) Filler::Refresh(impl_->slots[i], vectors[i]);
}

void LenientDecoder::Decode(uint64_t row, std::string_view value) {
  Impl& d = *impl_;
  od::object obj;
  if (OpenValidated(d.reader, d.filler, value, &d.doc, &obj) &&
      d.filler.FillObject(obj, d.slots, d.sorted, row, 0)) {
    return;
  }
  // Not a readable JSON object (FillObject fails only on what validation refuses).
  for (Slot& s : d.slots) d.filler.SetNull(s, row);
}

Status LenientDecoder::Finish() {
  for (Slot* l : impl_->lists) {
    if (l->list_capacity > 0) RETURN_IF_ERROR(l->vec.ListSetSize(l->list_size));
  }
  impl_->reader.Shrink();
  return Status::OK();
}

}  // namespace sluice::json
