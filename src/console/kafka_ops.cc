#include "console/kafka_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "console/message_view.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::console {
namespace {

using kafka::client::TopicPartition;
using SteadyClock = std::chrono::steady_clock;

std::chrono::milliseconds Left(SteadyClock::time_point deadline) {
  return std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()));
}

}  // namespace

ReadRecord KeepRecord(const kafka::client::MessageBatch& batch, size_t i) {
  kafka::client::Message m = batch[i];
  ReadRecord rec;
  rec.partition = m.partition;
  rec.offset = m.offset;
  rec.timestamp_ms = m.timestamp_ms;
  rec.key_size = m.key.size();
  rec.value_size = m.value.size();
  if (!batch.KeyIsNull(i)) rec.key = CutForShowing(m.key);
  if (!batch.ValueIsNull(i)) rec.value = CutForShowing(m.value);
  rec.headers = batch.Headers(i);
  for (auto& h : rec.headers) {
    if (h.value && h.value->size() > kMaxShownBytes) h.value->resize(kMaxShownBytes);
  }
  return rec;
}

Result<ResetTo> ParseResetTo(std::string_view s) {
  if (s == "earliest") return ResetTo::kEarliest;
  if (s == "latest") return ResetTo::kLatest;
  if (s == "offset") return ResetTo::kOffset;
  if (s == "timestamp") return ResetTo::kTimestamp;
  return InvalidArgumentError("'{}' is not earliest, latest, offset or timestamp", s);
}

Result<std::unique_ptr<KafkaOps>> KafkaOps::Create(kafka::client::Config client,
                                                   std::chrono::milliseconds timeout) {
  std::unique_ptr<KafkaOps> ops(new KafkaOps());
  ops->client_ = std::move(client);
  // Watermarks and reads as a browser wants them: the high watermark, not the last stable
  // offset (the admin handle's ListOffsets follow the handle's isolation level).
  ops->client_["isolation.level"] = "read_uncommitted";
  ops->client_["allow.auto.create.topics"] = "false";
  ops->timeout_ = timeout;
  ASSIGN_OR_RETURN(ops->admin_, kafka::client::Admin::Create(ops->client_));
  return ops;
}

KafkaOps::~KafkaOps() = default;

Result<ClusterDescription> KafkaOps::Cluster() {
  return admin_->DescribeCluster(false, {}, timeout_);
}

Result<std::vector<int32_t>> KafkaOps::PartitionsOf(const std::string& topic) {
  ASSIGN_OR_RETURN(ClusterDescription c, admin_->DescribeCluster(false, {topic}, timeout_));
  std::vector<int32_t> out;
  for (const PartitionInfo& p : c.topics.at(0).partitions) out.push_back(p.partition);
  return out;
}

Result<std::vector<TopicSummary>> KafkaOps::ListTopics(bool internal,
                                                       const LocalWatermarks& local) {
  const auto deadline = SteadyClock::now() + timeout_;
  ASSIGN_OR_RETURN(ClusterDescription c, admin_->DescribeCluster(true, {}, timeout_));
  std::vector<TopicSummary> out;
  std::vector<TopicPartition> partitions;
  for (const auto& t : c.topics) {
    if (t.internal && !internal) continue;
    TopicSummary s;
    s.name = t.name;
    s.internal = t.internal;
    s.partitions = static_cast<int>(t.partitions.size());
    s.replication_factor =
        t.partitions.empty() ? 0 : static_cast<int>(t.partitions.front().replicas.size());
    out.push_back(std::move(s));
    for (const PartitionInfo& p : t.partitions) partitions.push_back({t.name, p.partition, 0});
  }
  std::vector<std::optional<Watermarks>> marks;
  if (local) marks = local(partitions);
  marks.resize(partitions.size());
  std::vector<TopicPartition> rest;
  std::vector<size_t> rest_at;
  for (size_t i = 0; i < partitions.size(); ++i) {
    if (marks[i].has_value()) continue;
    rest.push_back(partitions[i]);
    rest_at.push_back(i);
  }
  if (!rest.empty()) {
    // One ListOffsets round for the rest: a partition without a leader now fails the
    // whole answer, and their counts are then left at 0 rather than failing the list.
    Result<std::vector<Watermarks>> asked = admin_->QueryWatermarks(rest, Left(deadline));
    if (asked.ok()) {
      for (size_t i = 0; i < rest.size(); ++i) marks[rest_at[i]] = (*asked)[i];
    }
  }
  size_t at = 0;
  for (TopicSummary& s : out) {
    for (int i = 0; i < s.partitions; ++i, ++at) {
      if (marks[at].has_value()) s.messages += marks[at]->high - marks[at]->low;
    }
  }
  return out;
}

Result<TopicDetail> KafkaOps::DescribeTopic(const std::string& topic) {
  const auto deadline = SteadyClock::now() + timeout_;
  ASSIGN_OR_RETURN(ClusterDescription c, admin_->DescribeCluster(false, {topic}, timeout_));
  TopicDetail d;
  d.name = c.topics.at(0).name;
  d.internal = c.topics[0].internal;
  std::vector<TopicPartition> partitions;
  for (const PartitionInfo& p : c.topics[0].partitions) {
    d.partitions.push_back({p, {}});
    partitions.push_back({topic, p.partition, 0});
  }
  Result<std::vector<Watermarks>> marks = admin_->QueryWatermarks(partitions, Left(deadline));
  if (marks.ok()) {
    for (size_t i = 0; i < d.partitions.size(); ++i) d.partitions[i].marks = (*marks)[i];
  } else {
    // Per partition, so that one without a leader leaves only its own unknown (-1).
    for (PartitionDetail& p : d.partitions) {
      Result<Watermarks> w = admin_->QueryWatermarks(
          topic, p.info.partition, std::min(Left(deadline), std::chrono::milliseconds(2000)));
      p.marks = w.ok() ? *w : Watermarks{-1, -1};
    }
  }
  ASSIGN_OR_RETURN(d.configs, admin_->DescribeTopicConfigs(topic, Left(deadline)));
  return d;
}

Status KafkaOps::CreateTopic(const std::string& topic, int partitions, int replication_factor,
                             const std::map<std::string, std::string>& configs) {
  kafka::client::Config topic_config(configs.begin(), configs.end());
  return admin_->CreateTopic(topic, partitions, replication_factor, topic_config, timeout_);
}

Status KafkaOps::DeleteTopic(const std::string& topic) {
  return admin_->DeleteTopic(topic, timeout_);
}

Status KafkaOps::AddPartitions(const std::string& topic, int total) {
  return admin_->CreatePartitions(topic, total, timeout_);
}

Status KafkaOps::AlterConfigs(const std::string& topic,
                              const std::map<std::string, std::string>& set,
                              const std::vector<std::string>& remove) {
  return admin_->AlterTopicConfigs(topic, set, remove, timeout_);
}

Result<MessagePage> KafkaOps::ReadMessages(const MessageQuery& q) {
  if (q.limit < 1 || q.limit > MessageQuery::kMaxLimit) {
    return InvalidArgumentError("limit must be from 1 to {}, not {}", MessageQuery::kMaxLimit,
                                q.limit);
  }
  const auto deadline = SteadyClock::now() + q.deadline;
  std::vector<int32_t> partitions;
  if (q.partition.has_value()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> all, PartitionsOf(q.topic));
    if (std::find(all.begin(), all.end(), *q.partition) == all.end()) {
      return NotFoundError("topic '{}' has no partition {} (UNKNOWN_TOPIC_OR_PART)", q.topic,
                           *q.partition);
    }
    partitions.push_back(*q.partition);
  } else {
    ASSIGN_OR_RETURN(partitions, PartitionsOf(q.topic));
  }
  std::vector<TopicPartition> tps;
  for (int32_t p : partitions) tps.push_back({q.topic, p, 0});
  ASSIGN_OR_RETURN(std::vector<Watermarks> marks, admin_->QueryWatermarks(tps, Left(deadline)));

  // Per partition: [start, stop) to read, at most `limit` records of it.
  struct Range {
    int64_t start = 0, stop = 0;
    int64_t taken = 0;
    bool done = false;
    std::vector<ReadRecord> records;  // in offset order
  };
  std::map<int32_t, Range> ranges;
  std::vector<TopicPartition> assign;
  for (size_t i = 0; i < partitions.size(); ++i) {
    const Watermarks& w = marks[i];
    Range r;
    r.stop = w.high;
    switch (q.start) {
      case StartAt::kNewest:
        r.start = std::max(w.low, w.high - q.limit);
        break;
      case StartAt::kOldest:
        r.start = w.low;
        break;
      case StartAt::kOffset:
        r.start = std::clamp(q.offset, w.low, w.high);
        break;
      case StartAt::kTimestamp: {
        ASSIGN_OR_RETURN(
            r.start, admin_->OffsetForTime(q.topic, partitions[i], q.timestamp_ms, Left(deadline)));
        r.start = std::clamp(r.start, w.low, w.high);
        break;
      }
    }
    r.done = r.start >= r.stop;
    ranges[partitions[i]] = r;
    if (!r.done) assign.push_back({q.topic, partitions[i], r.start});
  }

  MessagePage page;
  size_t kept_bytes = 0;
  bool over_budget = false;
  if (!assign.empty()) {
    kafka::client::Config config = client_;
    config["enable.partition.eof"] = "true";
    config["isolation.level"] = "read_uncommitted";
    config["fetch.wait.max.ms"] = "100";
    config["auto.offset.reset"] = "earliest";
    config.emplace("client.id", "sluice-console");
    ASSIGN_OR_RETURN(auto consumer, kafka::client::Consumer::Create(config));
    RETURN_IF_ERROR(consumer->Assign(assign));
    auto all_done = [&] {
      return std::all_of(ranges.begin(), ranges.end(), [](const auto& e) { return e.second.done; });
    };
    while (!all_done() && !over_budget && SteadyClock::now() < deadline) {
      ASSIGN_OR_RETURN(kafka::client::MessageBatch batch,
                       consumer->Poll(std::min(Left(deadline), std::chrono::milliseconds(100))));
      if (!batch.errors().empty()) return batch.errors().front();
      for (size_t i = 0; i < batch.size(); ++i) {
        kafka::client::Message m = batch[i];
        auto it = ranges.find(m.partition);
        if (it == ranges.end() || it->second.done) continue;
        Range& r = it->second;
        if (m.offset < r.start) continue;
        if (m.offset >= r.stop) {
          r.done = true;
          continue;
        }
        ReadRecord rec = KeepRecord(batch, i);
        kept_bytes += (rec.key ? rec.key->size() : 0) + (rec.value ? rec.value->size() : 0);
        r.records.push_back(std::move(rec));
        if (++r.taken >= q.limit || m.offset + 1 >= r.stop) r.done = true;
        if (kept_bytes > MessageQuery::kMaxPageBytes) over_budget = true;
      }
      for (const auto& end : batch.ends()) {
        auto it = ranges.find(end.partition);
        if (it != ranges.end() && end.offset >= it->second.stop) it->second.done = true;
      }
    }
    page.partial = !all_done();
  }
  // Merged by time, each partition's records kept in offset order and never split: from
  // the start, the page takes the earliest head of any partition until it has `limit`;
  // from the newest, the latest tail. So what a page leaves out of a partition is all past
  // (or, from the newest, before) what it shows, and `next` misses nothing.
  std::vector<ReadRecord> read;
  std::map<int32_t, std::pair<size_t, size_t>> window;  // per partition: [first, last) taken
  for (auto& [p, r] : ranges)
    window[p] = q.start == StartAt::kNewest
                    ? std::pair<size_t, size_t>(r.records.size(), r.records.size())
                    : std::pair<size_t, size_t>(0, 0);
  while (read.size() < static_cast<size_t>(q.limit)) {
    int32_t best = -1;
    const ReadRecord* pick = nullptr;
    for (auto& [p, r] : ranges) {
      auto& [first, last] = window[p];
      if (q.start == StartAt::kNewest) {
        if (first == 0) continue;
        const ReadRecord& c = r.records[first - 1];
        if (pick == nullptr ||
            std::tie(c.timestamp_ms, c.partition) > std::tie(pick->timestamp_ms, pick->partition)) {
          pick = &c;
          best = p;
        }
      } else {
        if (last == r.records.size()) continue;
        const ReadRecord& c = r.records[last];
        if (pick == nullptr ||
            std::tie(c.timestamp_ms, c.partition) < std::tie(pick->timestamp_ms, pick->partition)) {
          pick = &c;
          best = p;
        }
      }
    }
    if (pick == nullptr) break;
    read.push_back(*pick);
    if (q.start == StartAt::kNewest) {
      --window[best].first;
    } else {
      ++window[best].second;
    }
  }
  auto by_time = [](const ReadRecord& a, const ReadRecord& b) {
    return std::tie(a.timestamp_ms, a.partition, a.offset) <
           std::tie(b.timestamp_ms, b.partition, b.offset);
  };
  std::sort(read.begin(), read.end(), by_time);
  for (const auto& [p, r] : ranges) {
    const auto& [first, last] = window.at(p);
    // Where the next page starts: after the last record taken (from the newest, after
    // this page's newest of the partition: the log's end when it took any).
    page.next[p] = q.start == StartAt::kNewest ? (first < r.records.size() ? r.stop : r.start)
                   : last > 0                  ? r.records[last - 1].offset + 1
                                               : r.start;
  }
  page.partial = page.partial || over_budget;
  page.records = std::move(read);
  return page;
}

Result<KafkaOps::Produced> KafkaOps::Produce(const std::string& topic,
                                             std::optional<int32_t> partition,
                                             std::optional<std::string> key,
                                             std::optional<std::string> value,
                                             const std::vector<RecordHeader>& headers) {
  // The topic and partition first: librdkafka would wait message.timeout.ms for a topic
  // that does not exist and then say only that it timed out.
  ASSIGN_OR_RETURN(std::vector<int32_t> partitions, PartitionsOf(topic));
  if (partition &&
      std::find(partitions.begin(), partitions.end(), *partition) == partitions.end()) {
    return NotFoundError("topic '{}' has no partition {} (UNKNOWN_TOPIC_OR_PART)", topic,
                         *partition);
  }
  kafka::client::Config config = client_;
  config.erase("isolation.level");  // a consumer's
  config["acks"] = "all";
  config["linger.ms"] = "0";
  config["message.timeout.ms"] = std::to_string(timeout_.count());
  config.emplace("client.id", "sluice-console");
  Produced out;
  Status delivery = InternalError("produce to '{}': no delivery report", topic);
  ASSIGN_OR_RETURN(auto producer, kafka::client::Producer::Create(
                                      config, [&](const kafka::client::DeliveryReport& r) {
                                        out.partition = r.partition;
                                        out.offset = r.offset;
                                        delivery = r.status;
                                      }));
  RETURN_IF_ERROR(producer->ProduceRecord(topic, partition.value_or(kafka::client::kAnyPartition),
                                          key, value, headers));
  RETURN_IF_ERROR(producer->Flush(timeout_ + std::chrono::milliseconds(1000)));
  RETURN_IF_ERROR(delivery);
  return out;
}

Result<std::vector<GroupListing>> KafkaOps::GroupListings() { return admin_->ListGroups(timeout_); }

Result<std::vector<GroupSummary>> KafkaOps::ListGroups() {
  ASSIGN_OR_RETURN(std::vector<GroupListing> groups, admin_->ListGroups(timeout_));
  std::vector<GroupSummary> out;
  for (GroupListing& g : groups) {
    GroupSummary s;
    Result<GroupDetail> detail = DescribeGroup(g.group_id);
    if (detail.ok()) {
      s.members = detail->description.members.size();
      int64_t lag = 0;
      bool known = true;
      for (const GroupOffset& o : detail->offsets) {
        if (o.offset < 0) continue;
        if (o.lag < 0) known = false;
        lag += std::max<int64_t>(o.lag, 0);
      }
      if (known) s.lag = lag;
    }
    s.listing = std::move(g);
    out.push_back(std::move(s));
  }
  return out;
}

Result<GroupDetail> KafkaOps::DescribeGroup(const std::string& group) {
  const auto deadline = SteadyClock::now() + timeout_;
  GroupDetail out;
  ASSIGN_OR_RETURN(out.description, admin_->DescribeGroup(group, timeout_));
  ASSIGN_OR_RETURN(std::vector<TopicPartition> committed,
                   admin_->GroupOffsets(group, Left(deadline)));
  if (out.description.state == "Dead" && out.description.members.empty() && committed.empty()) {
    return NotFoundError("group '{}': no such group (GROUP_ID_NOT_FOUND)", group);
  }
  std::vector<TopicPartition> tps;
  for (const TopicPartition& tp : committed) {
    out.offsets.push_back({tp.topic, tp.partition, tp.offset, -1, -1});
    tps.push_back({tp.topic, tp.partition, 0});
  }
  // The partitions members hold but never committed, too (their lag is unknown).
  std::set<std::pair<std::string, int32_t>> seen;
  for (const TopicPartition& tp : committed) seen.emplace(tp.topic, tp.partition);
  for (const auto& m : out.description.members) {
    for (const TopicPartition& tp : m.assignment) {
      if (seen.emplace(tp.topic, tp.partition).second) {
        out.offsets.push_back({tp.topic, tp.partition, -1, -1, -1});
        tps.push_back({tp.topic, tp.partition, 0});
      }
    }
  }
  Result<std::vector<Watermarks>> marks = admin_->QueryWatermarks(tps, Left(deadline));
  for (size_t i = 0; i < out.offsets.size(); ++i) {
    GroupOffset& o = out.offsets[i];
    if (marks.ok()) {
      o.high = (*marks)[i].high;
    } else {
      // One at a time: a deleted topic's partitions stay unknown, not the group's.
      Result<Watermarks> w = admin_->QueryWatermarks(
          o.topic, o.partition, std::min(Left(deadline), std::chrono::milliseconds(2000)));
      if (w.ok()) o.high = w->high;
    }
    if (o.high >= 0 && o.offset >= 0) o.lag = std::max<int64_t>(o.high - o.offset, 0);
  }
  std::sort(out.offsets.begin(), out.offsets.end(), [](const GroupOffset& a, const GroupOffset& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  return out;
}

Result<std::vector<ResetRow>> KafkaOps::ResetOffsets(const std::string& group,
                                                     const ResetSpec& spec) {
  const auto deadline = SteadyClock::now() + timeout_;
  ASSIGN_OR_RETURN(std::vector<int32_t> all, PartitionsOf(spec.topic));
  std::vector<int32_t> partitions = spec.partitions.empty() ? all : spec.partitions;
  std::sort(partitions.begin(), partitions.end());
  partitions.erase(std::unique(partitions.begin(), partitions.end()), partitions.end());
  for (int32_t p : partitions) {
    if (std::find(all.begin(), all.end(), p) == all.end()) {
      return NotFoundError("topic '{}' has no partition {} (UNKNOWN_TOPIC_OR_PART)", spec.topic, p);
    }
  }
  ASSIGN_OR_RETURN(GroupDescription d, admin_->DescribeGroup(group, Left(deadline)));
  if (!d.members.empty()) {
    return FailedPreconditionError(
        "group '{}' has {} member(s): offsets can be reset only while it has none; stop its "
        "consumers first (NON_EMPTY_GROUP)",
        group, d.members.size());
  }
  ASSIGN_OR_RETURN(std::vector<TopicPartition> committed,
                   admin_->GroupOffsets(group, Left(deadline)));
  std::vector<TopicPartition> tps;
  for (int32_t p : partitions) tps.push_back({spec.topic, p, 0});
  ASSIGN_OR_RETURN(std::vector<Watermarks> marks, admin_->QueryWatermarks(tps, Left(deadline)));
  std::vector<ResetRow> rows;
  std::vector<TopicPartition> target;
  for (size_t i = 0; i < partitions.size(); ++i) {
    ResetRow row{spec.topic, partitions[i], -1, 0};
    for (const TopicPartition& c : committed) {
      if (c.topic == spec.topic && c.partition == partitions[i]) row.previous = c.offset;
    }
    switch (spec.to) {
      case ResetTo::kEarliest:
        row.offset = marks[i].low;
        break;
      case ResetTo::kLatest:
        row.offset = marks[i].high;
        break;
      case ResetTo::kOffset:
        row.offset = std::clamp(spec.value, marks[i].low, marks[i].high);
        break;
      case ResetTo::kTimestamp: {
        ASSIGN_OR_RETURN(row.offset, admin_->OffsetForTime(spec.topic, partitions[i], spec.value,
                                                           Left(deadline)));
        break;
      }
    }
    rows.push_back(row);
    target.push_back({spec.topic, row.partition, row.offset});
  }
  if (spec.execute) RETURN_IF_ERROR(admin_->AlterGroupOffsets(group, target, Left(deadline)));
  return rows;
}

Status KafkaOps::CommitResets(const std::string& group, const std::vector<ResetRow>& rows) {
  std::vector<TopicPartition> target;
  for (const ResetRow& r : rows) target.push_back({r.topic, r.partition, r.offset});
  return admin_->AlterGroupOffsets(group, target, timeout_);
}

Status KafkaOps::DeleteGroup(const std::string& group) {
  return admin_->DeleteGroup(group, timeout_);
}

}  // namespace sluice::console
