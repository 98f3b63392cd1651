// librdkafka test helpers shared by the C++ integration tests that talk to one `sluice
// serve` per test binary: RAII handles, a client with bootstrap.servers set, admin calls
// (create and delete topics), metadata and watermarks, and the gtest environment that
// starts the broker before the tests and checks that it stops cleanly after them.
// Header-only (inline): each test binary is one translation unit plus sluice_process.cc.
#pragma once

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice_process.h"

namespace sluice::integration {

using Props = std::vector<std::pair<std::string, std::string>>;

constexpr int kTimeoutMs = 20000;  // any single client call

// The broker of the test binary, set while BrokerEnvironment runs.
inline SluiceProcess* g_broker = nullptr;

inline std::string Bootstrap() { return g_broker->bootstrap(); }

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaPtr = std::unique_ptr<rd_kafka_t, KafkaDeleter>;
struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;
struct EventDeleter {
  void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
};
using EventPtr = std::unique_ptr<rd_kafka_event_t, EventDeleter>;

// A client of `type` with bootstrap.servers set, then `props`; `opaque` for callbacks,
// `extra` to set callbacks. nullptr (and a test failure) when librdkafka refuses.
inline KafkaPtr NewClient(rd_kafka_type_t type, const Props& props, void* opaque = nullptr,
                          const std::function<void(rd_kafka_conf_t*)>& extra = {}) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  Props all = {{"bootstrap.servers", Bootstrap()}, {"log_level", "4"}};
  all.insert(all.end(), props.begin(), props.end());
  for (const auto& [name, value] : all) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      ADD_FAILURE() << name << "=" << value << ": " << err;
      rd_kafka_conf_destroy(conf);
      return nullptr;
    }
  }
  if (opaque != nullptr) rd_kafka_conf_set_opaque(conf, opaque);
  if (extra) extra(conf);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == nullptr) {
    ADD_FAILURE() << "rd_kafka_new: " << err;
    rd_kafka_conf_destroy(conf);
    return nullptr;
  }
  if (type == RD_KAFKA_CONSUMER) rd_kafka_poll_set_consumer(rk);
  return KafkaPtr(rk);
}

inline ListPtr NewList(const std::string& topic,
                       const std::vector<std::pair<int32_t, int64_t>>& parts) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(parts.size())));
  for (const auto& [partition, offset] : parts) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition)->offset = offset;
  }
  return list;
}

// One admin request: options with timeouts, a queue for its result.
class AdminCall {
 public:
  AdminCall(rd_kafka_t* rk, rd_kafka_admin_op_t op)
      : queue_(rd_kafka_queue_new(rk)), options_(rd_kafka_AdminOptions_new(rk, op)) {
    char err[256];
    rd_kafka_AdminOptions_set_request_timeout(options_, kTimeoutMs, err, sizeof err);
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS ||
        op == RD_KAFKA_ADMIN_OP_CREATEPARTITIONS || op == RD_KAFKA_ADMIN_OP_DELETERECORDS) {
      rd_kafka_AdminOptions_set_operation_timeout(options_, kTimeoutMs / 2, err, sizeof err);
    }
  }
  ~AdminCall() {
    rd_kafka_AdminOptions_destroy(options_);
    rd_kafka_queue_destroy(queue_);
  }
  AdminCall(const AdminCall&) = delete;
  AdminCall& operator=(const AdminCall&) = delete;

  rd_kafka_queue_t* queue() const { return queue_; }
  const rd_kafka_AdminOptions_t* options() const { return options_; }

  // The result event, or nullptr (and a test failure) when none came, it has another
  // type, or the request as a whole failed.
  EventPtr Wait(rd_kafka_event_type_t type) {
    EventPtr ev(rd_kafka_queue_poll(queue_, kTimeoutMs + 5000));
    if (!ev) {
      ADD_FAILURE() << "no admin result within the timeout";
      return nullptr;
    }
    if (rd_kafka_event_type(ev.get()) != type) {
      ADD_FAILURE() << "admin result of type " << rd_kafka_event_name(ev.get());
      return nullptr;
    }
    if (rd_kafka_event_error(ev.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ADD_FAILURE() << "admin request failed: " << rd_kafka_event_error_string(ev.get());
      return nullptr;
    }
    return ev;
  }

 private:
  rd_kafka_queue_t* queue_;
  rd_kafka_AdminOptions_t* options_;
};

// CreateTopics for one topic: the topic's error code (NO_ERROR when created).
inline rd_kafka_resp_err_t CreateTopic(rd_kafka_t* rk, const std::string& name, int partitions,
                                       const Props& configs = {}, int replication_factor = 1) {
  char err[256];
  rd_kafka_NewTopic_t* topic =
      rd_kafka_NewTopic_new(name.c_str(), partitions, replication_factor, err, sizeof err);
  if (topic == nullptr) {
    ADD_FAILURE() << "NewTopic " << name << ": " << err;
    return RD_KAFKA_RESP_ERR__INVALID_ARG;
  }
  for (const auto& [k, v] : configs) rd_kafka_NewTopic_set_config(topic, k.c_str(), v.c_str());
  AdminCall call(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_CreateTopics(rk, &topic, 1, call.options(), call.queue());
  rd_kafka_NewTopic_destroy(topic);
  EventPtr ev = call.Wait(RD_KAFKA_EVENT_CREATETOPICS_RESULT);
  if (!ev) return RD_KAFKA_RESP_ERR__FAIL;
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
  if (n != 1) {
    ADD_FAILURE() << "CreateTopics answered " << n << " topics";
    return RD_KAFKA_RESP_ERR__FAIL;
  }
  return rd_kafka_topic_result_error(results[0]);
}

inline rd_kafka_resp_err_t DeleteTopic(rd_kafka_t* rk, const std::string& name) {
  rd_kafka_DeleteTopic_t* topic = rd_kafka_DeleteTopic_new(name.c_str());
  AdminCall call(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
  rd_kafka_DeleteTopics(rk, &topic, 1, call.options(), call.queue());
  rd_kafka_DeleteTopic_destroy(topic);
  EventPtr ev = call.Wait(RD_KAFKA_EVENT_DELETETOPICS_RESULT);
  if (!ev) return RD_KAFKA_RESP_ERR__FAIL;
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev.get()), &n);
  if (n != 1) return RD_KAFKA_RESP_ERR__FAIL;
  return rd_kafka_topic_result_error(results[0]);
}

// Partition count of `topic` in a Metadata response, -1 when it is not listed, or the
// negated error code when it is listed with one.
inline int PartitionCount(rd_kafka_t* rk, const std::string& topic) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, nullptr, &md, kTimeoutMs);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    ADD_FAILURE() << "Metadata: " << rd_kafka_err2str(err);
    return -1;
  }
  int count = -1;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md->topics[i];
    if (topic != t.topic) continue;
    count = t.err != RD_KAFKA_RESP_ERR_NO_ERROR ? -static_cast<int>(t.err) : t.partition_cnt;
    for (int p = 0; p < t.partition_cnt; ++p) {
      EXPECT_EQ(t.partitions[p].leader, md->orig_broker_id) << topic << " [" << p << "]";
    }
  }
  rd_kafka_metadata_destroy(md);
  return count;
}

// The log start and the high watermark (the last stable offset for a read_committed
// handle), each a ListOffsets through rd_kafka_offsets_for_times, which keeps to its
// timeout: librdkafka 2.0's rd_kafka_query_watermark_offsets retries at a leader that
// went away for as long as it stays down (src/kafka/client/rdkafka_util.h, ListOffset).
inline std::pair<int64_t, int64_t> Watermarks(rd_kafka_t* rk, const std::string& topic,
                                              int32_t partition) {
  auto list_offset = [&](int64_t spec) -> int64_t {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = spec;
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(rk, list, kTimeoutMs);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = list->elems[0].err;
    const int64_t offset = err == RD_KAFKA_RESP_ERR_NO_ERROR ? list->elems[0].offset : -100;
    rd_kafka_topic_partition_list_destroy(list);
    EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR)
        << topic << " [" << partition << "]: " << rd_kafka_err2str(err);
    return offset;
  };
  return {list_offset(RD_KAFKA_OFFSET_BEGINNING), list_offset(RD_KAFKA_OFFSET_END)};
}

// One broker for the whole binary; it must stop cleanly (exit 0) on SIGTERM.
class BrokerEnvironment : public ::testing::Environment {
 public:
  BrokerEnvironment(std::string sluice, std::string config)
      : process_(std::move(sluice), std::move(config)) {}

  void SetUp() override {
    std::string error = process_.Start();
    if (!error.empty()) {
      process_.DumpLogs();
      FAIL() << error;
    }
    g_broker = &process_;
  }

  void TearDown() override {
    int status = process_.Stop();
    bool failed = ::testing::UnitTest::GetInstance()->failed_test_count() > 0;
    EXPECT_EQ(status, 0) << "sluice serve after SIGTERM";
    if (failed || status != 0) process_.DumpLogs();
    g_broker = nullptr;
  }

 private:
  SluiceProcess process_;
};

// The body of a test binary's main: `usage: NAME [gtest flags] path/to/sluice`, one
// broker started with `config` (YAML) for all the tests.
inline int RunWithBroker(int argc, char** argv, const char* config) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s [gtest flags] path/to/sluice\n", argv[0]);
    return 2;
  }
  ::testing::AddGlobalTestEnvironment(new BrokerEnvironment(argv[1], config));
  return RUN_ALL_TESTS();
}

}  // namespace sluice::integration
