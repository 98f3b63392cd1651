// DecoderPlans and ReaderOf (decoder_plans.h); the framing.
#include "schema/decoder_plans.h"

#include <fmt/format.h>

#include "schema/avro/avro_format.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema {

namespace {

constexpr std::string_view kFormatNames[] = {"json", "avro", "protobuf", "json_schema"};

template <typename R>
std::vector<R> As(const std::vector<registry::Reference>& refs) {
  std::vector<R> out;
  for (const registry::Reference& r : refs) out.push_back({r.name, r.schema_text});
  return out;
}

}  // namespace

std::string_view PayloadFormatName(PayloadFormat f) { return kFormatNames[static_cast<int>(f)]; }

bool ReadFraming(std::string_view value, int32_t* id, std::string_view* rest, std::string* reason) {
  if (value.data() == nullptr) {
    *reason = "the message has no value (a tombstone)";
    return false;
  }
  if (value.size() < 5) {
    *reason = fmt::format(
        "not in the Confluent framing: {} bytes, fewer than the 5 of the "
        "magic byte and the schema id",
        value.size());
    return false;
  }
  if (value[0] != 0) {
    *reason = fmt::format("not in the Confluent framing: magic byte {} (0 expected)",
                          static_cast<unsigned char>(value[0]));
    return false;
  }
  const auto* b = reinterpret_cast<const unsigned char*>(value.data());
  *id = static_cast<int32_t>((uint32_t{b[1]} << 24) | (uint32_t{b[2]} << 16) |
                             (uint32_t{b[3]} << 8) | uint32_t{b[4]});
  *rest = value.substr(5);
  return true;
}

void WriteFraming(int32_t id, std::string* out) {
  const auto u = static_cast<uint32_t>(id);
  out->push_back('\0');
  out->push_back(static_cast<char>(u >> 24));
  out->push_back(static_cast<char>(u >> 16));
  out->push_back(static_cast<char>(u >> 8));
  out->push_back(static_cast<char>(u));
}

Result<ReaderShape> ReaderOf(const SchemaRecord& r, std::span<const int> indexes) {
  ReaderShape out;
  if (r.type == SchemaType::kAvro) {
    ASSIGN_OR_RETURN(avro::Parsed p, avro::Parse(r.text, As<avro::Reference>(r.references)));
    auto parsed = std::make_shared<const avro::Parsed>(std::move(p));
    ASSIGN_OR_RETURN(out.columns, avro::ColumnsOf(*parsed));
    out.record = parsed->root().type == lake::avro::Type::kRecord;
    out.avro = std::move(parsed);
  } else if (r.type == SchemaType::kProtobuf) {
    ASSIGN_OR_RETURN(protobuf::Parsed p,
                     protobuf::Parse(r.text, As<protobuf::Reference>(r.references)));
    std::vector<int> at(indexes.begin(), indexes.end());
    if (at.empty()) at = {0};
    ASSIGN_OR_RETURN(out.columns, protobuf::ColumnsOf(p, at));
  } else {
    return InvalidArgumentError("schema id {} is JSON Schema: its values are read as JSON", r.id);
  }
  return out;
}

struct DecoderPlans::Plan {
  std::shared_ptr<avro::Parsed> avro;
  std::shared_ptr<protobuf::Parsed> proto;
  std::unique_ptr<RowDecoder> decoder;
  std::string error;  // why values of this schema cannot be decoded
};

namespace {

// Protobuf values whose message indexes name no message, read as the first message with
// no indexes (the npm client's framing): a failure says both.
class WithoutIndexes final : public RowDecoder {
 public:
  WithoutIndexes(std::unique_ptr<RowDecoder> inner, int32_t id)
      : inner_(std::move(inner)), id_(id) {}
  void BindVectors(std::span<const duck::Vector> columns) override { inner_->BindVectors(columns); }
  size_t column_count() const override { return inner_->column_count(); }
  bool Decode(std::string_view payload, uint64_t row, std::string* reason) override {
    if (inner_->Decode(payload, row, reason)) return true;
    *reason = fmt::format(
        "the message indexes name no message of schema id {}; read without indexes as its "
        "first message: {}",
        id_, *reason);
    return false;
  }
  Status Finish(uint64_t rows) override { return inner_->Finish(rows); }

 private:
  std::unique_ptr<RowDecoder> inner_;
  int32_t id_;
};

}  // namespace

DecoderPlans::DecoderPlans(std::shared_ptr<SchemaSource> source, PayloadFormat format,
                           std::vector<Column> columns,
                           std::shared_ptr<const avro::Parsed> avro_reader)
    : source_(std::move(source)),
      format_(format),
      columns_(std::move(columns)),
      avro_reader_(std::move(avro_reader)) {}

DecoderPlans::~DecoderPlans() = default;

// Whether schema `id` is Protobuf and has a message at `indexes` (false for anything else:
// the plan then says what is wrong).
Result<bool> DecoderPlans::Names(int32_t id, std::span<const int> indexes) {
  Result<std::shared_ptr<const SchemaRecord>> rec = source_->ById(id);
  if (!rec.ok())
    return rec.status().code() == StatusCode::kNotFound ? Result<bool>(true) : rec.status();
  if ((*rec)->type != SchemaType::kProtobuf) return true;
  Result<protobuf::Parsed> p =
      protobuf::Parse((*rec)->text, As<protobuf::Reference>((*rec)->references));
  if (!p.ok()) return true;
  return protobuf::FindMessage(*p, indexes).ok();
}

Result<RowDecoder*> DecoderPlans::For(std::string_view value, std::string_view* payload,
                                      std::string* reason) {
  int32_t id = 0;
  if (!ReadFraming(value, &id, payload, reason)) return nullptr;
  // Most messages name the schema the last one named: no lookup for them (Avro).
  if (format_ == PayloadFormat::kAvro && id == last_id_ && last_ != nullptr) return last_;
  std::string key = std::to_string(id);
  indexes_.clear();
  if (format_ == PayloadFormat::kProtobuf) {
    // The message indexes; a producer that writes none (@kafkajs/confluent-schema-registry
    // does not) is read as the first message: when the bytes do not read as indexes naming
    // a message of the schema. A payload cannot start with the byte 0 (no field 0), so
    // [0] itself is never ambiguous.
    size_t consumed = 0;
    std::string why;
    const std::string_view whole = *payload;
    bool named = protobuf::ReadMessageIndexes(whole, &indexes_, &consumed, &why);
    if (named) {
      std::string with = key;
      for (int i : indexes_) with += fmt::format("/{}", i);
      auto found = plans_.find(with);
      if (found == plans_.end()) {
        ASSIGN_OR_RETURN(bool exists, Names(id, indexes_));
        named = exists;
      }
      if (named) {
        key = std::move(with);
        *payload = whole.substr(consumed);
      }
    }
    if (!named) {
      indexes_ = {0};
      key += "/none";
    }
  }
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Result<std::shared_ptr<const SchemaRecord>> rec = source_->ById(id);
    if (!rec.ok()) {
      if (rec.status().code() != StatusCode::kNotFound) return rec.status();
      // Not remembered: a schema registered later is found then.
      *reason = fmt::format("schema id {} is unknown to {}", id, source_->Describe());
      return nullptr;
    }
    auto plan = std::make_unique<Plan>();
    const SchemaRecord& w = **rec;
    const SchemaType want =
        format_ == PayloadFormat::kAvro ? SchemaType::kAvro : SchemaType::kProtobuf;
    Status st;
    if (w.type != want) {
      st = InvalidArgumentError("it is {}, not {}", registry::SchemaTypeName(w.type),
                                registry::SchemaTypeName(want));
    } else if (want == SchemaType::kAvro) {
      Result<avro::Parsed> p = avro::Parse(w.text, As<avro::Reference>(w.references));
      st = p.status();
      if (p.ok()) {
        plan->avro = std::make_shared<avro::Parsed>(std::move(p).value());
        auto dec = avro::MakeRowDecoder(*plan->avro, avro_reader_.get(), columns_);
        st = dec.status();
        if (dec.ok()) plan->decoder = std::move(dec).value();
      }
    } else {
      Result<protobuf::Parsed> p = protobuf::Parse(w.text, As<protobuf::Reference>(w.references));
      st = p.status();
      if (p.ok()) {
        plan->proto = std::make_shared<protobuf::Parsed>(std::move(p).value());
        auto dec = protobuf::MakeRowDecoder(*plan->proto, indexes_, columns_);
        st = dec.status();
        if (dec.ok()) plan->decoder = std::move(dec).value();
      }
    }
    if (!st.ok()) plan->error = fmt::format("schema id {}: {}", id, st.message());
    if (plan->decoder != nullptr && key.ends_with("/none")) {
      plan->decoder = std::make_unique<WithoutIndexes>(std::move(plan->decoder), id);
    }
    it = plans_.emplace(key, std::move(plan)).first;
  }
  if (!it->second->error.empty()) {
    *reason = it->second->error;
    return nullptr;
  }
  last_id_ = id;
  last_ = it->second->decoder.get();
  return last_;
}

}  // namespace sluice::schema
