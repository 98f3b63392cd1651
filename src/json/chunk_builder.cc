// ChunkBuilder and ChunkPool: binding a Slot plan to chunks, and the in-memory batch.
#include "json/chunk_builder.h"

#include "json/filler.h"

namespace sluice::json {

namespace {

void ResetLists(Slot& s) {
  s.list_size = 0;
  s.list_capacity = 0;
  for (Slot& c : s.children) ResetLists(c);
}

}  // namespace

ChunkBuilder::ChunkBuilder(duck::DataChunk chunk, std::vector<Slot> slots)
    : chunk_(std::move(chunk)), slots_(std::move(slots)) {
  for (Slot& s : slots_) {
    IndexTree(s);
    CollectLists(s);
  }
  IndexFields(slots_, &sorted_);
  list_marks_.resize(lists_.size());
  Bind();
}

Status ChunkBuilder::Finish() {
  for (Slot* l : lists_) {
    if (l->list_capacity > 0) RETURN_IF_ERROR(l->vec.ListSetSize(l->list_size));
  }
  chunk_.SetSize(rows_);
  return Status::OK();
}

duck::DataChunk ChunkBuilder::Swap(duck::DataChunk empty) {
  std::swap(chunk_, empty);
  rows_ = 0;
  Bind();
  return empty;
}

void ChunkBuilder::CollectLists(Slot& s) {
  if (s.kind == Kind::kList) lists_.push_back(&s);
  for (Slot& c : s.children) CollectLists(c);
}

void ChunkBuilder::Bind() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    ResetLists(slots_[i]);
    Filler::Refresh(slots_[i], chunk_.column(i));
  }
}

void ChunkPool::Recycle() {
  for (duck::DataChunk& c : held_) {
    c.Reset();
    spare_.push_back(std::move(c));
  }
  held_.clear();
}

Status ChunkPool::Hold(ChunkBuilder& b) {
  RETURN_IF_ERROR(b.Finish());
  if (spare_.empty()) {
    ASSIGN_OR_RETURN(duck::DataChunk fresh, duck::DataChunk::Create(types_));
    spare_.push_back(std::move(fresh));
  }
  duck::DataChunk next = std::move(spare_.back());
  spare_.pop_back();
  held_.push_back(b.Swap(std::move(next)));
  return Status::OK();
}

std::vector<const duck::DataChunk*> ChunkPool::batch() const {
  std::vector<const duck::DataChunk*> out;
  for (const duck::DataChunk& c : held_) out.push_back(&c);
  return out;
}

}  // namespace sluice::json
