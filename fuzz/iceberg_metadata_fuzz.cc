// Fuzz target for Iceberg metadata JSON: the first byte picks the decoder (even: table
// metadata, odd: a REST commit request applied to a fixed valid table), the rest is the
// document. Whatever it is, the result is a value or an error with a message (no crash, no
// hang); accepted metadata validates, and re-serializing it and parsing it again gives the
// same metadata.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lake/table_metadata.h"
#include "lake/table_update.h"

using namespace sluice::lake;

namespace {

const TableMetadata& BaseTable() {
  static const TableMetadata base = [] {
    NewTableOptions o;
    o.location = "s3://fuzz/t";
    o.schema.fields = {NestedField{1, "id", true, Type::Primitive(TypeId::kLong), {}},
                       NestedField{2, "ts", false, Type::Primitive(TypeId::kTimestampTz), {}},
                       NestedField{3, "data", false, Type::Primitive(TypeId::kString), {}}};
    o.spec.fields = {PartitionField{2, 0, "ts_day", Transform::Day()}};
    o.table_uuid = "9c12d441-03fe-4693-9a96-a0705ddf69c1";
    o.now_ms = 1700000000000;
    auto m = NewTable(o);
    if (!m.ok()) std::abort();
    return *m;
  }();
  return base;
}

void CheckRoundTrip(const TableMetadata& m) {
  if (!m.Validate().ok()) std::abort();
  auto again = TableMetadataFromJson(TableMetadataToString(m, false));
  if (!again.ok() || !(*again == m)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    auto m = TableMetadataFromJson(text);
    if (!m.ok()) {
      if (m.status().message().empty()) std::abort();
      return 0;
    }
    CheckRoundTrip(*m);
    return 0;
  }
  auto req = CommitRequestFromJson(text);
  if (!req.ok()) {
    if (req.status().message().empty()) std::abort();
    return 0;
  }
  (void)CommitRequestToJson(*req);
  const TableMetadata* base = (data[0] & 2) ? nullptr : &BaseTable();
  auto next = CommitTable(base, "s3://fuzz/t/metadata/00000.metadata.json", *req, 1700000001000);
  if (!next.ok()) {
    if (next.status().message().empty()) std::abort();
    return 0;
  }
  CheckRoundTrip(*next);
  return 0;
}
