// MetadataSnapshot lookups and its publication. See metadata_snapshot.h.
#include "broker/metadata_snapshot.h"

#include <utility>

namespace sluice::broker {

const MetadataSnapshot::Topic* MetadataSnapshot::FindById(const kafka::Uuid& id) const {
  // Linear: Fetch v13+ only, and a single node has few topics. An index would have to be
  // rebuilt whenever a snapshot is copied.
  for (const auto& [name, topic] : topics) {
    if (topic.info.id == id) return &topic;
  }
  return nullptr;
}

MetadataPublisher::MetadataPublisher(std::string advertised_host, int32_t advertised_port)
    : advertised_host_(std::move(advertised_host)), advertised_port_(advertised_port) {
  auto empty = std::make_shared<MetadataSnapshot>();
  empty->advertised_host = advertised_host_;
  empty->advertised_port = advertised_port_;
  published_ = std::move(empty);
}

void MetadataPublisher::Publish(std::shared_ptr<MetadataSnapshot> topics) {
  std::lock_guard lock(mu_);
  topics->advertised_host = advertised_host_;
  topics->advertised_port = advertised_port_;
  topics->endpoints = endpoints_;
  published_ = std::move(topics);
  version_.fetch_add(1, std::memory_order_release);
}

void MetadataPublisher::SetAdvertisedAddress(std::string host, int32_t port) {
  std::lock_guard lock(mu_);
  advertised_host_ = std::move(host);
  advertised_port_ = port;
  auto meta = std::make_shared<MetadataSnapshot>(*published_);
  meta->advertised_host = advertised_host_;
  meta->advertised_port = advertised_port_;
  published_ = std::move(meta);
  version_.fetch_add(1, std::memory_order_release);
}

void MetadataPublisher::SetAdvertisedEndpoints(std::vector<MetadataSnapshot::Endpoint> endpoints) {
  std::lock_guard lock(mu_);
  endpoints_ = std::move(endpoints);
  auto meta = std::make_shared<MetadataSnapshot>(*published_);
  meta->endpoints = endpoints_;
  published_ = std::move(meta);
  version_.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const MetadataSnapshot> MetadataPublisher::Current() const {
  std::lock_guard lock(mu_);
  return published_;
}

}  // namespace sluice::broker
