#include "broker/serve_config.h"

#include <gtest/gtest.h>

#include "broker/inter_broker_connection.h"

namespace sluice::broker {
namespace {

Result<ServeConfig> FromYaml(std::string_view yaml) {
  auto config = Config::Parse(yaml, "sluice.yaml");
  if (!config.ok()) return config.status();
  return ServeConfigFrom(*config);
}

TEST(ServeConfigTest, DefaultsAreKafkasOnLoopback) {
  auto c = FromYaml("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.host, "127.0.0.1");
  EXPECT_EQ(c->server.port, 9092);
  EXPECT_EQ(c->broker.advertised_port, 9092);
  EXPECT_EQ(c->server.connection.max_request_bytes, 100 << 20);
  EXPECT_EQ(c->broker.flush_policy, storage::FlushPolicy::kInterval);
  EXPECT_EQ(c->broker.flush_ms, 100);
  EXPECT_FALSE(c->broker.auto_create_topics);
  EXPECT_EQ(c->broker.topic_defaults.retention_ms, 7LL * 24 * 3600 * 1000);
}

TEST(ServeConfigTest, ReadsEverySection) {
  auto c = FromYaml(R"(
kafka:
  addr: 127.0.0.1:0
  advertised_addr: broker.example:19092
  max_request_bytes: 10MiB
data_dir: /tmp/x
shards: 3
storage:
  flush: {policy: durable, ms: 2s}
  retention_check_interval: 1m
topics:
  auto_create: true
  num_partitions: 6
  defaults:
    retention.ms: 3600000
    segment.bytes: 1048576
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.port, 0);
  EXPECT_EQ(c->broker.advertised_host, "broker.example");
  EXPECT_EQ(c->broker.advertised_port, 19092);
  EXPECT_EQ(c->server.connection.max_request_bytes, 10 << 20);
  EXPECT_EQ(c->broker.data_dir, "/tmp/x");
  EXPECT_EQ(c->server.shards, 3);
  EXPECT_EQ(c->broker.flush_policy, storage::FlushPolicy::kDurable);
  EXPECT_EQ(c->broker.flush_ms, 2000);
  EXPECT_EQ(c->broker.retention_check_interval_ms, 60000);
  EXPECT_TRUE(c->broker.auto_create_topics);
  EXPECT_EQ(c->broker.num_partitions, 6);
  EXPECT_EQ(c->broker.topic_defaults.retention_ms, 3600000);
  EXPECT_EQ(c->broker.topic_defaults.segment_bytes, 1048576);
  EXPECT_FALSE(c->broker.sasl.enabled);
}

TEST(ServeConfigTest, ReadsTheCleanerAndCompactionDefaults) {
  auto c = FromYaml(R"(
storage:
  cleaner:
    threads: 2
    dedupe_buffer_size: 64MiB
    io_max_bytes_per_second: 10MiB
    backoff: 2s
topics:
  defaults:
    cleanup.policy: compact
    delete.retention.ms: 1000
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.cleaner.threads, 2);
  EXPECT_EQ(c->broker.cleaner.dedupe_buffer_bytes, 64u << 20);
  EXPECT_DOUBLE_EQ(c->broker.cleaner.io_max_bytes_per_second, 10 << 20);
  EXPECT_EQ(c->broker.cleaner.backoff_ms, 2000);
  EXPECT_TRUE(c->broker.topic_defaults.compacted());
  EXPECT_EQ(c->broker.topic_defaults.delete_retention_ms, 1000);
  auto d = FromYaml("{}\n");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->broker.cleaner.threads, 1);
  EXPECT_EQ(d->broker.cleaner.dedupe_buffer_bytes, 128u << 20);
  EXPECT_FALSE(FromYaml("storage: {cleaner: {threads: 0}}\n").ok());
  EXPECT_FALSE(FromYaml("storage: {cleaner: {dedupe_buffer_size: 1000}}\n").ok());
  EXPECT_FALSE(FromYaml("storage: {cleaner: {io_max_bytes_per_second: 0}}\n").ok());
  EXPECT_FALSE(FromYaml("topics: {defaults: {cleanup.policy: shred}}\n").ok());
}

TEST(ServeConfigTest, ReadsTheSaslSection) {
  auto c = FromYaml("sasl: {enabled: true, users: ['alice:secret']}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->broker.sasl.enabled);
  ASSERT_EQ(c->broker.sasl.users.size(), 1u);
  EXPECT_EQ(c->broker.sasl.users[0].name, "alice");
  EXPECT_FALSE(FromYaml("sasl: {enabled: true, mechanisms: [KERBEROS], users: ['a:b']}\n").ok());
}

TEST(ServeConfigTest, ReadsTheTransactionsSection) {
  auto d = FromYaml("");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->broker.transactions.max_timeout_ms, 900000);
  EXPECT_EQ(d->broker.transactions.id_expiration_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(d->broker.transactions.abort_check_interval_ms, 10000);
  auto c =
      FromYaml("transactions: {max_timeout: 1m, id_expiration: 2h, abort_check_interval: 50}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.transactions.max_timeout_ms, 60000);
  EXPECT_EQ(c->broker.transactions.id_expiration_ms, 2 * 3600 * 1000);
  EXPECT_EQ(c->broker.transactions.abort_check_interval_ms, 50);
  auto bad = FromYaml("transactions: {max_timeout: 0}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("max_timeout"), std::string::npos);
  EXPECT_FALSE(FromYaml("transactions: {max_timeout: 30d}\n").ok());  // above int32 ms
  EXPECT_FALSE(FromYaml("transactions: {abort_check_interval: soon}\n").ok());
}

TEST(ServeConfigTest, ReadsTheFileIdleTimeout) {
  auto d = FromYaml("");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->broker.file_idle_timeout_ms, 5000);
  auto c = FromYaml("storage: {file_idle_timeout: 250ms}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.file_idle_timeout_ms, 250);
  auto never = FromYaml("storage: {file_idle_timeout: 0}\n");
  ASSERT_TRUE(never.ok()) << never.status().ToString();
  EXPECT_EQ(never->broker.file_idle_timeout_ms, 0);
}

TEST(ServeConfigTest, BadValuesNameTheKey) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"kafka: {addr: nowhere}", "kafka.addr"},
      {"kafka: {addr: '127.0.0.1:70000'}", "kafka.addr"},
      {"kafka: {addr: 'example.com:9092'}", "IPv4"},
      {"kafka: {advertised_addr: 'host'}", "kafka.advertised_addr"},
      {"kafka: {max_request_bytes: 12}", "kafka.max_request_bytes"},
      {"shards: 0", "shards"},
      {"storage: {flush: {policy: sometimes}}", "storage.flush.policy"},
      {"storage: {flush: {ms: soon}}", "storage.flush.ms"},
      {"topics: {defaults: {retention.ms: forever}}", "retention.ms"},
      {"topics: {defaults: {no.such: 1}}", "topics.defaults.no.such"},
      {"topics: {num_partitions: 0}", "topics.num_partitions"},
      {"colour: blue", "colour"},
      {"data_dir: ''", "data_dir"},
      {"kafka: {addr: '0.0.0.0:9092'}", "kafka.advertised_addr"},
      {"storage: {io_threads: 1}", "storage.io_threads"},
      {"storage: {file_idle_timeout: soon}", "storage.file_idle_timeout"},
      {"storage: {file_idle_timeout: -5s}", "storage.file_idle_timeout"},
      {"storage: {file_idle_timeout: [1]}", "storage.file_idle_timeout"},
  };
  for (const Case& c : cases) {
    auto r = FromYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

TEST(ServeConfigTest, WithoutEtcdThereIsNoCluster) {
  auto c = FromYaml("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->broker.cluster.enabled());
  EXPECT_EQ(c->broker.cluster.node_id, -1);
}

TEST(ServeConfigTest, ReadsTheClusterKeys) {
  auto c = FromYaml(R"(
kafka: {addr: '127.0.0.1:9093'}
etcd: 'http://127.0.0.1:2379, http://localhost:22379/'
node_id: 3
inter_broker_addr: 'broker-3.internal:19093'
cluster: {session_timeout: 2s, name: prod-1, controlled_shutdown_timeout: 3s}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ClusterOptions& k = c->broker.cluster;
  EXPECT_TRUE(k.enabled());
  EXPECT_EQ(k.etcd, (std::vector<std::string>{"http://127.0.0.1:2379", "http://localhost:22379/"}));
  EXPECT_EQ(k.node_id, 3);
  EXPECT_EQ(k.inter_broker_host, "broker-3.internal");
  EXPECT_EQ(k.inter_broker_port, 19093);
  EXPECT_EQ(k.session_timeout_ms, 2000);
  EXPECT_EQ(k.name, "prod-1");
  EXPECT_EQ(k.controlled_shutdown_timeout_ms, 3000);

  // A YAML list works too; the defaults are 6 s, "sluice" and the advertised address.
  auto d = FromYaml(R"(
kafka: {addr: '127.0.0.1:9094', advertised_addr: 'kafka-0:9094'}
etcd: ['http://127.0.0.1:2379', 'http://127.0.0.1:2380']
node_id: 0
)");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->broker.cluster.etcd.size(), 2u);
  EXPECT_EQ(d->broker.cluster.node_id, 0);
  EXPECT_EQ(d->broker.cluster.session_timeout_ms, 6000);
  EXPECT_EQ(d->broker.cluster.name, "sluice");
  EXPECT_EQ(d->broker.cluster.controlled_shutdown_timeout_ms, 10'000);
  EXPECT_EQ(d->broker.cluster.inter_broker_host, "kafka-0");
  EXPECT_EQ(d->broker.cluster.inter_broker_port, 9094);
}

TEST(ServeConfigTest, BadClusterKeysSayWhatIsWrong) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"etcd: 'http://127.0.0.1:2379'", "set node_id"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: -1", "a broker's id is a number"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: many", "node_id"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 3000000000", "node_id"},
      {"etcd: '127.0.0.1:2379'\nnode_id: 1", "not an etcd URL"},
      {"etcd: 'https://127.0.0.1:2379'\nnode_id: 1", "https"},
      {"etcd: 'http://127.0.0.1'\nnode_id: 1", "port is needed"},
      {"etcd: 'http://127.0.0.1:0'\nnode_id: 1", "port from 1 to 65535"},
      {"etcd: 'http://127.0.0.1:99999'\nnode_id: 1", "etcd (set in sluice.yaml"},
      {"etcd: 'http://127.0.0.1:2379/v3'\nnode_id: 1", "no path"},
      {"etcd: 'http://127.0.0.1:2379,'\nnode_id: 1", "not an etcd URL"},
      {"etcd: ''\nnode_id: 1", "no endpoint"},
      {"etcd: 'http://h_st:2379'\nnode_id: 1", "not an etcd URL"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {session_timeout: 1s}",
       "1000 ms is outside 2 s"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {session_timeout: 1h}",
       "cluster.session_timeout"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {session_timeout: later}",
       "cluster.session_timeout"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {name: 'a/b'}", "cluster.name"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {name: ''}", "cluster.name"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ninter_broker_addr: nowhere",
       "inter_broker_addr"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ninter_broker_addr: '0.0.0.0:9000'",
       "inter_broker_addr"},
      {"kafka: {addr: '127.0.0.1:0'}\netcd: 'http://127.0.0.1:2379'\nnode_id: 1",
       "needs a fixed port"},
      {"node_id: 1", "is a cluster setting: set etcd"},
      {"inter_broker_addr: '127.0.0.1:9000'", "set etcd"},
      {"cluster: {session_timeout: 2s}", "set etcd"},
      {"cluster: {controlled_shutdown_timeout: 2s}", "set etcd"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {controlled_shutdown_timeout: 6m}",
       "outside 0 (off) to 300 s"},
      {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\ncluster: {controlled_shutdown_timeout: soon}",
       "cluster.controlled_shutdown_timeout"},
  };
  for (const Case& c : cases) {
    auto r = FromYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

TEST(ServeConfigTest, ReadsTheReplicationKeysWithKafkasDefaults) {
  auto d = FromYaml("etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const ClusterOptions& k = d->broker.cluster;
  EXPECT_EQ(k.replica_lag_time_max_ms, 30'000);
  EXPECT_EQ(k.replica_fetch_max_bytes, 1 << 20);
  EXPECT_EQ(k.replica_fetch_wait_max_ms, 500);
  EXPECT_EQ(k.replica_fetch_backoff_ms, 1'000);
  EXPECT_EQ(k.replica_socket_timeout_ms, 30'000);
  EXPECT_TRUE(k.replica_follower_direct_writes);
  // Kafka's dotted names, nested or flat.
  auto c = FromYaml(R"(
etcd: 'http://127.0.0.1:2379'
node_id: 1
replica.lag.time.max.ms: 10000
replica:
  fetch.max.bytes: 2097152
  fetch: {wait.max.ms: 250, backoff.ms: 0}
  socket.timeout.ms: 5000
  follower.direct.writes: false
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ClusterOptions& o = c->broker.cluster;
  EXPECT_EQ(o.replica_lag_time_max_ms, 10'000);
  EXPECT_EQ(o.replica_fetch_max_bytes, 2 << 20);
  EXPECT_EQ(o.replica_fetch_wait_max_ms, 250);
  EXPECT_EQ(o.replica_fetch_backoff_ms, 0);
  EXPECT_EQ(o.replica_socket_timeout_ms, 5000);
  EXPECT_FALSE(o.replica_follower_direct_writes);
}

TEST(ServeConfigTest, MalformedReplicationKeysSayWhatIsWrong) {
  const std::string cluster = "etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n";
  struct Case {
    std::string yaml;
    const char* expect;
  } cases[] = {
      {cluster + "replica.lag.time.max.ms: 0", "replica.lag.time.max.ms (set in sluice.yaml"},
      {cluster + "replica.lag.time.max.ms: -5", "replica.lag.time.max.ms"},
      {cluster + "replica.lag.time.max.ms: 30s", "replica.lag.time.max.ms"},
      {cluster + "replica.lag.time.max.ms: 99999999999999999999", "replica.lag.time.max.ms"},
      {cluster + "replica.lag.time.max.ms: ''", "replica.lag.time.max.ms"},
      {cluster + "replica.lag.time.max.ms: [1, 2]", "replica.lag.time.max.ms"},
      {cluster + "replica.fetch.max.bytes: -1", "replica.fetch.max.bytes"},
      {cluster + "replica.fetch.max.bytes: 3000000000", "from 0 to 2147483647"},
      {cluster + "replica.fetch.max.bytes: 1MiB", "replica.fetch.max.bytes"},
      {cluster + "replica.fetch.wait.max.ms: lots", "replica.fetch.wait.max.ms"},
      {cluster + "replica.fetch.backoff.ms: -1", "replica.fetch.backoff.ms"},
      {cluster + "replica.socket.timeout.ms: 0", "replica.socket.timeout.ms"},
      {cluster + "replica.socket.timeout.ms: 1e3", "replica.socket.timeout.ms"},
      {cluster + "replica.follower.direct.writes: maybe", "replica.follower.direct.writes (set in"},
      {cluster + "replica.follower.direct.writes: [true]", "true or false"},
      {"replica.follower.direct.writes: false", "set etcd"},
      {cluster + "replica: {fetch.wait.max.ms: 2000, socket.timeout.ms: 1000}",
       "longer than replica.socket.timeout.ms"},
      {cluster + "replica: {fetch.wait.max.ms: 2000, lag.time.max.ms: 1000}",
       "longer than replica.lag.time.max.ms"},
      {cluster + "replica.lag.time.max.ms: 1\nreplica: {lag.time.max.ms: 2}", "replica"},
      {"replica.lag.time.max.ms: 10000", "is a cluster setting: set etcd"},
      {"replica: {socket.timeout.ms: 10000}", "set etcd"},
      {cluster + "replica.fetch.min.bytes: 1", "replica.fetch.min.bytes"},
  };
  for (const Case& c : cases) {
    auto r = FromYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

TEST(ServeConfigTest, ReadsTheInternalTopicKeysWithTheirDefaults) {
  auto d = FromYaml("etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const ClusterOptions& k = d->broker.cluster;
  EXPECT_EQ(k.offsets_topic_num_partitions, 16);
  EXPECT_EQ(k.offsets_topic_replication_factor, 3);
  EXPECT_EQ(k.txn_state_log_num_partitions, 16);
  EXPECT_EQ(k.txn_state_log_replication_factor, 3);
  EXPECT_EQ(k.txn_state_log_min_isr, 2);
  auto c = FromYaml(R"(
etcd: 'http://127.0.0.1:2379'
node_id: 1
offsets.topic.num.partitions: 50
offsets.topic: {replication.factor: 1}
transaction.state.log:
  num.partitions: 4
  replication.factor: 5
  min.isr: 3
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ClusterOptions& o = c->broker.cluster;
  EXPECT_EQ(o.offsets_topic_num_partitions, 50);
  EXPECT_EQ(o.offsets_topic_replication_factor, 1);
  EXPECT_EQ(o.txn_state_log_num_partitions, 4);
  EXPECT_EQ(o.txn_state_log_replication_factor, 5);
  EXPECT_EQ(o.txn_state_log_min_isr, 3);
}

TEST(ServeConfigTest, MalformedInternalTopicKeysSayWhatIsWrong) {
  const std::string cluster = "etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n";
  struct Case {
    std::string yaml;
    const char* expect;
  } cases[] = {
      {cluster + "offsets.topic.num.partitions: 0",
       "offsets.topic.num.partitions (set in sluice.yaml"},
      {cluster + "offsets.topic.num.partitions: -1", "from 1 to 10000"},
      {cluster + "offsets.topic.num.partitions: 10001", "offsets.topic.num.partitions"},
      {cluster + "offsets.topic.num.partitions: many", "offsets.topic.num.partitions"},
      {cluster + "offsets.topic.replication.factor: 0", "offsets.topic.replication.factor"},
      {cluster + "offsets.topic.replication.factor: 40000", "from 1 to 32767"},
      {cluster + "transaction.state.log.num.partitions: 2.5",
       "transaction.state.log.num.partitions"},
      {cluster + "transaction.state.log.replication.factor: [3]",
       "transaction.state.log.replication.factor"},
      {cluster + "transaction.state.log.min.isr: 0", "transaction.state.log.min.isr"},
      {cluster + "transaction.state.log: {min.isr: 4, replication.factor: 3}",
       "is above transaction.state.log.replication.factor"},
      {cluster + "transaction.state.log.min.isr: 4", "no transaction state could ever be written"},
      {"offsets.topic.num.partitions: 8", "is a cluster setting: set etcd"},
      {"transaction.state.log: {min.isr: 1}", "set etcd"},
      {cluster + "offsets.topic.segment.bytes: 1", "offsets.topic.segment.bytes"},
  };
  for (const Case& c : cases) {
    auto r = FromYaml(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

TEST(ServeConfigTest, ClusterFlagsOverrideTheFile) {
  auto config = Config::Parse("etcd: 'http://127.0.0.1:1'\nnode_id: 1\n", "f.yaml");
  ASSERT_TRUE(config.ok());
  config->Set("etcd", "http://127.0.0.1:2,http://127.0.0.1:3", "--etcd");
  config->Set("node_id", "7", "--node-id");
  auto c = ServeConfigFrom(*config);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.cluster.etcd.size(), 2u);
  EXPECT_EQ(c->broker.cluster.node_id, 7);
  config->Set("node_id", "-2", "--node-id");
  auto bad = ServeConfigFrom(*config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--node-id"), std::string::npos) << bad.status().message();
}

TEST(ServeConfigTest, FlagsOverrideTheFile) {
  auto config = Config::Parse("kafka: {addr: '127.0.0.1:1'}\ndata_dir: a\n", "f.yaml");
  ASSERT_TRUE(config.ok());
  config->Set("kafka.addr", "127.0.0.1:2");
  auto c = ServeConfigFrom(*config);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->server.port, 2);
  EXPECT_EQ(c->broker.data_dir, "a");
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

constexpr std::string_view kTwoListeners = R"(
etcd: 'http://127.0.0.1:2379'
node_id: 2
kafka:
  listeners: ["PLAINTEXT://127.0.0.1:9092", "SASL_PLAINTEXT://127.0.0.1:9094"]
  advertised_listeners: ["PLAINTEXT://b2.internal:9092", "SASL_PLAINTEXT://b2.example:19094"]
sasl:
  enabled: true
  mechanisms: [SCRAM-SHA-256, PLAIN]
  users: ["admin:admin-secret", "alice:alice-secret"]
)";

// The inter-broker listener (Kafka's inter.broker.listener.name): PLAINTEXT by default; the
// others reach this broker at its advertised address unless inter_broker_addr says otherwise.
TEST(ServeConfigTest, TheInterBrokerListenerAndItsAddress) {
  auto c = FromYaml(kTwoListeners);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ClusterOptions& k = c->broker.cluster;
  ASSERT_NE(k.inter_broker_security, nullptr);
  EXPECT_EQ(k.inter_broker_security->listener, "PLAINTEXT");
  EXPECT_FALSE(k.inter_broker_security->tls);
  EXPECT_EQ(k.inter_broker_security->sasl_mechanism, "");
  EXPECT_EQ(k.inter_broker_host, "b2.internal");
  EXPECT_EQ(k.inter_broker_port, 9092);

  c = FromYaml(std::string(kTwoListeners) +
               "  inter_broker_user: admin\nkafka.inter_broker_listener: SASL_PLAINTEXT\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const InterBrokerSecurity& s = *c->broker.cluster.inter_broker_security;
  EXPECT_EQ(s.listener, "SASL_PLAINTEXT");
  EXPECT_EQ(s.sasl_mechanism, "SCRAM-SHA-256");  // the first of sasl.mechanisms
  EXPECT_EQ(s.sasl_user, "admin");
  EXPECT_EQ(s.sasl_password, "admin-secret");
  EXPECT_EQ(c->broker.cluster.inter_broker_host, "b2.example");
  EXPECT_EQ(c->broker.cluster.inter_broker_port, 19094);

  c = FromYaml(std::string(kTwoListeners) +
               "  inter_broker_user: alice\n  inter_broker_mechanism: PLAIN\n"
               "kafka.inter_broker_listener: SASL_PLAINTEXT\ninter_broker_addr: 10.0.0.2:9094\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.cluster.inter_broker_security->sasl_mechanism, "PLAIN");
  EXPECT_EQ(c->broker.cluster.inter_broker_host, "10.0.0.2");

  // kafka.addr with sasl.enabled: its one listener is SASL_PLAINTEXT, so the broker needs a
  // user to reach the others.
  c = FromYaml(R"(
etcd: 'http://127.0.0.1:2379'
node_id: 1
sasl: {enabled: true, users: ["admin:pw"], inter_broker_user: admin}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.cluster.inter_broker_security->listener, "SASL_PLAINTEXT");
  EXPECT_EQ(c->broker.cluster.inter_broker_security->sasl_mechanism, "PLAIN");
}

TEST(ServeConfigTest, BadInterBrokerSettingsSayWhatIsWrong) {
  const std::string two(kTwoListeners);
  for (auto [yaml, why] : std::vector<std::pair<std::string, std::string>>{
           {two + "kafka.inter_broker_listener: SSL\n",
            "'SSL' is not one of this broker's listeners (PLAINTEXT, SASL_PLAINTEXT)"},
           {two + "kafka.inter_broker_listener: SASL_PLAINTEXT\n",
            "sasl.inter_broker_user: the inter-broker listener SASL_PLAINTEXT authenticates"},
           {two + "  inter_broker_user: carol\nkafka.inter_broker_listener: SASL_PLAINTEXT\n",
            "('carol' is not one)"},
           {two + "  inter_broker_user: admin\n  inter_broker_mechanism: SCRAM-SHA-512\n"
                  "kafka.inter_broker_listener: SASL_PLAINTEXT\n",
            "'SCRAM-SHA-512' is not one of sasl.mechanisms (SCRAM-SHA-256, PLAIN)"},
           {two + "  inter_broker_user: admin\n",
            "the inter-broker listener PLAINTEXT has no SASL"},
           {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n"
            "kafka.listeners: ['SASL_PLAINTEXT://127.0.0.1:9094']\n"
            "sasl: {enabled: true, users: ['admin:pw']}\n",
            "'PLAINTEXT' is not one of this broker's listeners (SASL_PLAINTEXT)"},
           {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\n"
            "kafka.listeners: ['PLAINTEXT://127.0.0.1:0']\n",
            "PLAINTEXT has port 0: a broker of a cluster needs fixed ports"},
           {"etcd: 'http://127.0.0.1:2379'\nnode_id: 1\nsasl: {enabled: true, users: ['a:b']}\n",
            "name one of sasl.users"},
           {"kafka.inter_broker_listener: PLAINTEXT\n", "is a cluster setting"},
           {"sasl: {enabled: true, users: ['a:b'], inter_broker_user: a}\n",
            "sasl.inter_broker_user (set in sluice.yaml:1) is a cluster setting"},
       }) {
    auto c = FromYaml(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find(why), std::string::npos)
        << yaml << "\n -> " << c.status().message();
    EXPECT_EQ(c.status().message().find("admin-secret"), std::string::npos);
  }
}

TEST(ServeConfigTest, TheSslPrincipalMappingRules) {
  auto c = FromYaml("ssl.principal.mapping.rules: 'RULE:^CN=(.*)$/$1/L, DEFAULT'\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_NE(c->server.connection.ssl_principal_mapper, nullptr);
  EXPECT_EQ(*c->server.connection.ssl_principal_mapper->Apply("CN=Bob"), "bob");
  c = FromYaml("ssl.principal.mapping.rules: 'RULE:^CN=(.*)$'\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(
      c.status().message().find("ssl.principal.mapping.rules (set in sluice.yaml:1): Invalid rule"),
      std::string::npos)
      << c.status().message();
}

TEST(ServeConfigTest, ReadsTheAuthorizationKeys) {
  auto c = FromYaml("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->broker.authorization.enabled);  // Kafka without an authorizer

  c = FromYaml(
      "authorization:\n  enabled: true\n  super_users: ['User:admin', 'User:CN=broker']\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->broker.authorization.enabled);
  EXPECT_EQ(c->broker.authorization.super_users,
            (std::vector<std::string>{"User:admin", "User:CN=broker"}));
  EXPECT_FALSE(c->broker.authorization.allow_everyone_if_no_acl_found);

  // Kafka's super.users syntax.
  c = FromYaml(
      "authorization: {enabled: true, super_users: 'User:a; User:b;',"
      " allow_everyone_if_no_acl_found: true}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->broker.authorization.super_users, (std::vector<std::string>{"User:a", "User:b"}));
  EXPECT_TRUE(c->broker.authorization.allow_everyone_if_no_acl_found);

  // The brokers' SASL user is a super user: they may replicate.
  c = FromYaml(std::string(kTwoListeners) +
               "  inter_broker_user: admin\nkafka.inter_broker_listener: SASL_PLAINTEXT\n"
               "authorization: {enabled: true, super_users: ['User:admin']}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
}

TEST(ServeConfigTest, BadAuthorizationKeysSayWhatIsWrong) {
  for (auto [yaml, why] : std::vector<std::pair<std::string, std::string>>{
           {"authorization: {enabled: maybe}\n", "authorization.enabled"},
           {"authorization: {enabled: true, super_users: [admin]}\n",
            "'admin' is not a principal TYPE:NAME"},
           {"authorization: {enabled: true, super_users: 'User:a;:b'}\n",
            "':b' is not a principal"},
           {"authorization: {enabled: true, super_users: 'User:admin,User:alice'}\n",
            "looks like several principals: separate them with ';'"},
           {"authorization: {super_users: ['User:admin']}\n",
            "authorization.super_users (set in sluice.yaml:1) has no effect without "
            "authorization.enabled: true"},
           {"authorization: {allow_everyone_if_no_acl_found: true}\n", "has no effect"},
           {std::string(kTwoListeners) +
                "  inter_broker_user: admin\nkafka.inter_broker_listener: SASL_PLAINTEXT\n"
                "authorization: {enabled: true, super_users: ['User:alice']}\n",
            "the brokers replicate as User:admin (sasl.inter_broker_user), which must be a super "
            "user"},
       }) {
    auto c = FromYaml(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find(why), std::string::npos) << c.status().ToString();
  }
}

}  // namespace
}  // namespace sluice::broker
