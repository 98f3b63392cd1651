#include "broker/listeners_config.h"

#include <gtest/gtest.h>

namespace sluice::broker {
namespace listeners_config_test {
namespace {

Result<std::optional<std::vector<KafkaListener>>> Read(std::string_view yaml,
                                                       ListenerContext context = {}) {
  auto config = Config::Parse(yaml, "sluice.yaml");
  if (!config.ok()) return config.status();
  return KafkaListenersFromConfig(*config, context);
}

TEST(ListenersConfigTest, AbsentMeansTheShorthand) {
  auto r = Read("kafka: {addr: 127.0.0.1:9092}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
}

TEST(ListenersConfigTest, ReadsKafkasFormsWithTheirAdvertisedAddresses) {
  ListenerContext both{.tls_configured = true, .sasl_enabled = true};
  auto r = Read(R"(
kafka:
  listeners: ["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://0.0.0.0:9093", "SSL://localhost:0"]
  advertised_listeners: ["SASL_SSL://broker1.example:19093"]
)",
                both);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const std::vector<KafkaListener>& l = **r;
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].name, "PLAINTEXT");
  EXPECT_EQ(l[0].host, "127.0.0.1");
  EXPECT_EQ(l[0].port, 9092);
  EXPECT_EQ(l[0].advertised_host, "127.0.0.1");
  EXPECT_EQ(l[0].advertised_port, 9092);
  EXPECT_FALSE(l[0].tls() || l[0].sasl());
  EXPECT_EQ(l[1].name, "SASL_SSL");
  EXPECT_EQ(l[1].host, "0.0.0.0");
  EXPECT_EQ(l[1].advertised_host, "broker1.example");
  EXPECT_EQ(l[1].advertised_port, 19093);
  EXPECT_TRUE(l[1].tls() && l[1].sasl());
  EXPECT_EQ(l[2].host, "127.0.0.1");
  EXPECT_EQ(l[2].port, 0);  // the kernel picks; advertised once bound
  EXPECT_TRUE(l[2].tls());
  EXPECT_FALSE(l[2].sasl());

  // Kafka's own one-string form, spaces around the commas.
  r = Read("kafka.listeners: 'PLAINTEXT://127.0.0.1:9092 , SASL_PLAINTEXT://127.0.0.1:9094'\n",
           ListenerContext{.sasl_enabled = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->size(), 2u);
  EXPECT_EQ((**r)[1].name, "SASL_PLAINTEXT");
  EXPECT_EQ((**r)[1].port, 9094);
}

TEST(ListenersConfigTest, MalformedListenersSayWhatIsWrong) {
  const ListenerContext both{.tls_configured = true, .sasl_enabled = true};
  const ListenerContext plain{};
  struct Case {
    std::string yaml;
    ListenerContext context;
    const char* expect;
  } cases[] = {
      {"kafka: {addr: 127.0.0.1:9092, listeners: ['PLAINTEXT://127.0.0.1:9093']}", plain,
       "kafka.addr (set in sluice.yaml:1) and kafka.listeners"},
      {"kafka: {advertised_addr: a:1, listeners: ['PLAINTEXT://127.0.0.1:9093']}", plain,
       "kafka.advertised_addr"},
      {"kafka: {listeners: []}", plain, "is empty"},
      {"kafka: {listeners: ''}", plain, "is empty"},
      {"kafka: {listeners: 7}", plain, "is not NAME://HOST:PORT"},
      {"kafka: {listeners: [[1, 2]]}", plain, "every item of a list"},
      {"kafka: {listeners: ['127.0.0.1:9092']}", plain, "is not NAME://HOST:PORT"},
      {"kafka: {listeners: ['HTTP://127.0.0.1:9092']}", plain, "names no security protocol"},
      {"kafka: {listeners: ['plaintext://127.0.0.1:9092']}", plain, "names no security protocol"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1']}", plain, "is not NAME://HOST:PORT"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:']}", plain, "no port"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:70000']}", plain, "no port"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:-1']}", plain, "no port"},
      {"kafka: {listeners: ['PLAINTEXT://broker.example:9092']}", plain, "IPv4"},
      {"kafka: {listeners: ['PLAINTEXT://:9092']}", plain, "is not NAME://HOST:PORT"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092', 'PLAINTEXT://127.0.0.1:9093']}", plain,
       "PLAINTEXT is named twice"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092', 'SSL://127.0.0.1:9092']}", both,
       "both listen on port 9092"},
      {"kafka: {listeners: ['PLAINTEXT://0.0.0.0:9092', 'SSL://127.0.0.1:9092']}", both,
       "both listen on port 9092"},
      {"kafka: {listeners: ['PLAINTEXT://0.0.0.0:9092']}", plain, "listens on 0.0.0.0"},
      {"kafka: {listeners: ['SSL://127.0.0.1:9093']}", plain, "SSL needs the tls: section"},
      {"kafka: {listeners: ['SASL_SSL://127.0.0.1:9093']}", ListenerContext{.tls_configured = true},
       "SASL_SSL needs sasl.enabled"},
      {"kafka: {listeners: ['SASL_PLAINTEXT://127.0.0.1:9093']}", plain, "needs sasl.enabled"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092']}", ListenerContext{.sasl_enabled = true},
       "no listener in kafka.listeners"},
      {"kafka: {advertised_listeners: ['PLAINTEXT://a:1']}", plain, "needs kafka.listeners"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092'], advertised_listeners: ['SSL://a:1']}",
       plain, "SSL is not in kafka.listeners"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092'], advertised_listeners: "
       "['PLAINTEXT://a:1', 'PLAINTEXT://b:2']}",
       plain, "PLAINTEXT is named twice"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092'], advertised_listeners: "
       "['PLAINTEXT://a:0']}",
       plain, "clients can connect to"},
      {"kafka: {listeners: ['PLAINTEXT://0.0.0.0:9092'], advertised_listeners: "
       "['PLAINTEXT://0.0.0.0:9092']}",
       plain, "clients can connect to"},
      {"kafka: {listeners: ['PLAINTEXT://127.0.0.1:9092'], advertised_listeners: [7]}", plain,
       "is not NAME://HOST:PORT"},
  };
  for (const Case& c : cases) {
    auto r = Read(c.yaml, c.context);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace listeners_config_test
}  // namespace sluice::broker
