// librdkafka's C API against a replicated cluster (issue 21, docs/design/0018-cluster.md):
// etcd and three `sluice serve --etcd` brokers (cluster_process.h), a topic of three
// partitions with replication factor 3 and min.insync.replicas=2. An idempotent acks=all
// producer sends a record every few milliseconds and a consumer group member reads the
// topic, while the leader of a partition (not the controller, where the group coordinator
// lives until 0018 phase D) is SIGKILLed and later restarted with an empty data directory
// (a new incarnation, back in every ISR once caught up). Both carry on by themselves: the
// test only waits for the acknowledgements to grow. At the end the group has read every
// acknowledged record at its offset, and a final read of every partition, with the acks,
// passes tests/tools/history_checker.py (nothing lost, nothing twice, in order).
//
// usage: cluster_rdkafka_clients_test [gtest flags] path/to/sluice
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cluster_process.h"
#include "rdkafka_util.h"

namespace sluice::integration {
namespace {

using namespace std::chrono_literals;

constexpr const char* kTopic = "replicated";
constexpr int kPartitions = 3;
std::string g_sluice;

struct Ack {
  int32_t partition;
  int64_t offset;
  std::string value;
};

// What the producer's delivery reports said, filled on librdkafka's poll (the producer
// thread), read by the test's thread.
struct Deliveries {
  std::mutex mu;
  std::vector<Ack> acks;              // guarded by mu
  std::vector<std::string> failures;  // guarded by mu
  size_t Acked() {
    std::lock_guard lock(mu);
    return acks.size();
  }
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* d = static_cast<Deliveries*>(opaque);
  std::string value(static_cast<const char*>(m->payload), m->len);
  std::lock_guard lock(d->mu);
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    d->failures.push_back(value + ": " + rd_kafka_err2str(m->err));
  } else {
    d->acks.push_back({m->partition, m->offset, value});
  }
}

// Each partition's leader and ISR size as `rk`'s Metadata says (empty when it fails).
std::vector<std::pair<int32_t, int>> TopicView(rd_kafka_t* rk) {
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 1, nullptr, &md, 5000) != RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  std::vector<std::pair<int32_t, int>> out;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md->topics[i];
    if (std::string(t.topic) != kTopic || t.partition_cnt != kPartitions) continue;
    out.resize(kPartitions);
    for (int p = 0; p < t.partition_cnt; ++p) {
      out[t.partitions[p].id] = {t.partitions[p].leader, t.partitions[p].isr_cnt};
    }
  }
  rd_kafka_metadata_destroy(md);
  return out;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return done();
}

// Every partition from its start to its high watermark, as history_checker.py's "read"
// and "end" events.
std::vector<std::string> FinalRead(const std::string& bootstrap) {
  KafkaPtr c = NewClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                             {"group.id", "final-read"},
                                             {"enable.auto.commit", "false"}});
  std::vector<std::string> events;
  for (int p = 0; p < kPartitions; ++p) {
    auto [low, high] = Watermarks(c.get(), kTopic, p);
    ListPtr list = NewList(kTopic, {{p, low}});
    EXPECT_EQ(rd_kafka_assign(c.get(), list.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
    int64_t next = low;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (next < high && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(c.get(), 500);
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        events.push_back(fmt::format(
            R"({{"type":"read","topic":"{}","partition":{},"offset":{},"value":"{}"}})", kTopic, p,
            m->offset, std::string(static_cast<const char*>(m->payload), m->len)));
        next = m->offset + 1;
      }
      rd_kafka_message_destroy(m);
    }
    EXPECT_GE(next, high) << kTopic << "-" << p;
    events.push_back(fmt::format(R"({{"type":"end","topic":"{}","partition":{},"offset":{}}})",
                                 kTopic, p, next));
    rd_kafka_assign(c.get(), nullptr);
  }
  rd_kafka_consumer_close(c.get());
  return events;
}

TEST(ClusterRdkafkaClientsTest, ProducerAndGroupCarryOnThroughALeadersKillAndRestart) {
  if (std::string why = ClusterProcesses::Unavailable(); !why.empty()) GTEST_SKIP() << why;
  ClusterProcesses cluster;
  std::string error = cluster.Start(g_sluice);
  ASSERT_EQ(error, "");
  g_broker = &cluster.broker(1);  // rdkafka_util's default bootstrap; overridden below
  const std::string bootstrap = cluster.Bootstraps();
  KafkaPtr admin = NewClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", bootstrap}});
  // Metadata names a controller (the broker itself before it has seen the elected one).
  ASSERT_TRUE(WaitFor([&] { return rd_kafka_controllerid(admin.get(), 1000) >= 0; }, 30s));
  ASSERT_EQ(CreateTopic(admin.get(), kTopic, kPartitions, {{"min.insync.replicas", "2"}}, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<std::pair<int32_t, int>> view;
  ASSERT_TRUE(WaitFor(
      [&] {
        view = TopicView(admin.get());
        if (view.empty()) return false;
        for (auto [leader, isr] : view) {
          if (leader < 0 || isr != 3) return false;
        }
        return true;
      },
      30s))
      << "leaders and ISRs of three";
  const int controller = cluster.Controller();
  int partition = -1;
  for (int p = 0; p < kPartitions && partition < 0; ++p) {
    if (view[p].first != controller) partition = p;
  }
  ASSERT_GE(partition, 0);
  const int victim = view[partition].first;

  // The producer: a record every few milliseconds until told to stop, then a flush.
  Deliveries deliveries;
  std::atomic<bool> stop_producing{false};
  std::atomic<int> sent{0};  // records handed to librdkafka so far
  std::thread producer_thread([&] {
    KafkaPtr p = NewClient(
        RD_KAFKA_PRODUCER,
        {{"bootstrap.servers", bootstrap},
         {"enable.idempotence", "true"},
         {"acks", "all"},
         {"linger.ms", "5"},
         {"message.timeout.ms", "120000"}},
        &deliveries, [](rd_kafka_conf_t* conf) { rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery); });
    for (int seq = 0; !stop_producing; ++seq) {
      const std::string value = "rk:" + std::to_string(seq);
      rd_kafka_resp_err_t err;
      while ((err = rd_kafka_producev(
                  p.get(), RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_KEY(value.data(), value.size()),
                  RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
             RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(p.get(), 100);
      }
      EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
      sent = seq + 1;
      rd_kafka_poll(p.get(), 3);
    }
    EXPECT_EQ(rd_kafka_flush(p.get(), 120000), RD_KAFKA_RESP_ERR_NO_ERROR);
  });

  // The group member: every record it reads, until told to stop.
  std::mutex read_mu;
  std::vector<std::tuple<int32_t, int64_t, std::string>> reads;  // guarded by read_mu
  std::atomic<bool> stop_consuming{false};
  std::thread consumer_thread([&] {
    KafkaPtr c = NewClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                               {"group.id", "cluster-rdkafka"},
                                               {"auto.offset.reset", "earliest"},
                                               {"session.timeout.ms", "10000"},
                                               {"heartbeat.interval.ms", "500"}});
    ListPtr topics(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(topics.get(), kTopic, RD_KAFKA_PARTITION_UA);
    EXPECT_EQ(rd_kafka_subscribe(c.get(), topics.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
    while (!stop_consuming) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(c.get(), 200);
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::lock_guard lock(read_mu);
        reads.emplace_back(m->partition, m->offset,
                           std::string(static_cast<const char*>(m->payload), m->len));
      }
      rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(c.get());
  });

  auto acked_past = [&](size_t n, const char* what) {
    EXPECT_TRUE(WaitFor([&] { return deliveries.Acked() > n; }, 120s))
        << what << ": " << deliveries.Acked() << " acknowledged";
    return deliveries.Acked();
  };
  size_t n = acked_past(200, "the first acknowledgements");
  const int sent_before_kill = sent;
  cluster.broker(victim).Kill();
  std::fprintf(stderr, "%zu acknowledged; killed broker %d, the leader of %s-%d (controller %d)\n",
               n, victim, kTopic, partition, controller);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto v = TopicView(admin.get());
        return !v.empty() && v[partition].first >= 0 && v[partition].first != victim;
      },
      60s))
      << "a new leader";
  n = acked_past(deliveries.Acked() + 300, "producing after the kill");
  std::fprintf(stderr, "carried on: %zu acknowledged\n", n);
  // Restarted without its data directory (a replaced disk): a new incarnation, never
  // elected with its empty log, back in the ISRs once caught up.
  std::filesystem::remove_all(cluster.broker(victim).data_dir());
  error = cluster.broker(victim).Start();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(WaitFor(
      [&] {
        auto v = TopicView(admin.get());
        if (v.empty()) return false;
        for (auto [leader, isr] : v) {
          if (isr != 3) return false;
        }
        return true;
      },
      90s))
      << "the restarted broker back in every ISR";
  n = acked_past(deliveries.Acked() + 200, "producing after the restart");
  stop_producing = true;
  producer_thread.join();

  std::vector<Ack> acks;
  {
    std::lock_guard lock(deliveries.mu);
    acks = deliveries.acks;
    EXPECT_TRUE(deliveries.failures.empty())
        << deliveries.failures.size() << " delivery failures, first: " << deliveries.failures[0];
  }
  // The group reads every acknowledged record (at least once) at its offset.
  std::map<std::pair<int32_t, int64_t>, std::string> read_at;
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(read_mu);
        for (const auto& [p, o, v] : reads) read_at.emplace(std::pair(p, o), v);
        for (const Ack& a : acks) {
          if (!read_at.contains({a.partition, a.offset})) return false;
        }
        return true;
      },
      120s))
      << "the group reading every acknowledged record";
  stop_consuming = true;
  consumer_thread.join();
  for (const auto& [p, o, v] : reads) {
    EXPECT_EQ(read_at[std::pair(p, o)], v)
        << kTopic << "-" << p << " offset " << o << " read twice";
  }
  for (const Ack& a : acks) {
    EXPECT_EQ(read_at[std::pair(a.partition, a.offset)], a.value)
        << kTopic << "-" << a.partition << " offset " << a.offset;
  }
  // The killed leader's partition took records sent after the kill (its new leader's).
  EXPECT_TRUE(std::any_of(acks.begin(), acks.end(),
                          [&](const Ack& a) {
                            return a.partition == partition &&
                                   std::stoi(a.value.substr(3)) >= sent_before_kill;
                          }))
      << "no record sent after the kill was acknowledged on " << kTopic << "-" << partition;
  std::fprintf(stderr, "%zu acknowledged, the group read %zu (%zu offsets)\n", acks.size(),
               reads.size(), read_at.size());

  // The whole history through history_checker.py.
  const std::filesystem::path history =
      std::filesystem::temp_directory_path() /
      ("sluice-rdkafka-history-" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream out(history);
    for (const Ack& a : acks) {
      out << fmt::format(R"({{"type":"ack","topic":"{}","partition":{},"offset":{},"value":"{}"}})",
                         kTopic, a.partition, a.offset, a.value)
          << "\n";
    }
    for (const std::string& e : FinalRead(cluster.broker(victim == 1 ? 2 : 1).bootstrap())) {
      out << e << "\n";
    }
  }
  const std::string command =
      std::string("/usr/bin/python3 ") + SLUICE_HISTORY_CHECKER + " " + history.string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::filesystem::remove(history);
  if (::testing::Test::HasFailure()) cluster.DumpLogs();
  g_broker = nullptr;
}

}  // namespace
}  // namespace sluice::integration

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s [gtest flags] path/to/sluice\n", argv[0]);
    return 2;
  }
  sluice::integration::g_sluice = argv[1];
  return RUN_ALL_TESTS();
}
