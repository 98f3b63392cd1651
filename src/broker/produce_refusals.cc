#include "broker/produce_refusals.h"

namespace sluice::broker {

void ProduceRefusals::Refused(const std::string& topic, int32_t partition, int64_t producer_id,
                              int16_t epoch, int32_t base_sequence, kafka::ErrorCode error,
                              int64_t now_ms) {
  if (producer_id < 0) return;
  Key key{{topic, partition}, producer_id};
  auto it = refused_.find(key);
  if (it != refused_.end() && it->second.epoch == epoch &&
      it->second.base_sequence <= base_sequence && now_ms - it->second.at_ms <= kMaxAgeMs) {
    return;  // the lower one is what the client resends first
  }
  if (it == refused_.end() && refused_.size() >= kMaxEntries) refused_.clear();
  refused_[key] = Entry{epoch, base_sequence, error, now_ms};
}

void ProduceRefusals::Written(const std::string& topic, int32_t partition, int64_t producer_id) {
  if (refused_.empty()) return;  // the usual case: no key (and no string copy) to build
  refused_.erase(Key{{topic, partition}, producer_id});
}

kafka::ErrorCode ProduceRefusals::Check(const std::string& topic, int32_t partition,
                                        int64_t producer_id, int16_t epoch, int32_t base_sequence,
                                        int64_t now_ms, int32_t* refused_sequence) {
  if (producer_id < 0 || refused_.empty()) return kafka::ErrorCode::kNone;
  auto it = refused_.find(Key{{topic, partition}, producer_id});
  if (it == refused_.end()) return kafka::ErrorCode::kNone;
  Entry& e = it->second;
  if (e.epoch != epoch || now_ms - e.at_ms > kMaxAgeMs || e.uses >= kMaxUses) {
    refused_.erase(it);
    return kafka::ErrorCode::kNone;
  }
  if (base_sequence <= e.base_sequence) return kafka::ErrorCode::kNone;  // the resend, or older
  ++e.uses;
  if (refused_sequence != nullptr) *refused_sequence = e.base_sequence;
  return e.error;
}

}  // namespace sluice::broker
