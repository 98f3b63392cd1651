#include "broker/client_quotas.h"

#include <gtest/gtest.h>

namespace sluice::broker {
namespace client_quotas_test {
namespace {

using Parts = std::vector<std::pair<std::string, std::optional<std::string>>>;
using Part = std::optional<std::optional<std::string>>;
const std::optional<std::string> kDefault;

QuotaEntity User(std::optional<std::string> u) { return QuotaEntity{Part(u), Part()}; }
QuotaEntity Client(std::optional<std::string> c) { return QuotaEntity{Part(), Part(c)}; }
QuotaEntity UserClient(std::optional<std::string> u, std::optional<std::string> c) {
  return QuotaEntity{Part(u), Part(c)};
}

std::shared_ptr<QuotaStore> StoreWith(const std::vector<QuotaAlteration>& entries) {
  auto store = QuotaStore::Load("", nullptr);
  EXPECT_TRUE(store.ok());
  std::shared_ptr<QuotaStore> s = std::move(*store);
  for (const Status& st : s->Alter(entries, false)) EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

QuotaAlteration Set(QuotaEntity e, std::string key, double value) {
  return QuotaAlteration{std::move(e), {{std::move(key), value, false}}};
}

TEST(ClientQuotasTest, EntitiesAreKafkasCombinations) {
  auto e = QuotaEntityFrom(Parts{{"user", "alice"}, {"client-id", std::nullopt}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, UserClient("alice", kDefault));
  EXPECT_EQ(QuotaEntityParts(*e), (Parts{{"user", "alice"}, {"client-id", std::nullopt}}));
  for (auto [parts, why] : std::vector<std::pair<Parts, std::string>>{
           {{}, "Invalid empty client quota entity"},
           {{{"user", "a"}, {"user", "b"}}, "Duplicate user entity type"},
           {{{"ip", "10.0.0.1"}}, "ip quotas (connection_creation_rate) are not supported"},
           {{{"group", "g"}}, "Unhandled client quota entity type: group"},
           {{{"client-id", ""}}, "Empty client-id name"},
       }) {
    auto bad = QuotaEntityFrom(parts);
    ASSERT_FALSE(bad.ok()) << why;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
}

TEST(ClientQuotasTest, ValuesAreChecked) {
  EXPECT_TRUE(ValidateQuota("producer_byte_rate", 1024).ok());
  EXPECT_TRUE(ValidateQuota("request_percentage", 12.5).ok());
  for (auto [key, value, why] : std::vector<std::tuple<std::string, double, std::string>>{
           {"producer_bytes", 1, "Invalid configuration key producer_bytes"},
           {"controller_mutation_rate", 1, "controller_mutation_rate is not supported"},
           {"consumer_byte_rate", 10.5, "must be a whole number"},
           {"producer_byte_rate", 0, "must be above zero"},
           {"request_percentage", -1, "must be above zero"},
           {"request_percentage", std::numeric_limits<double>::quiet_NaN(), "above zero"},
       }) {
    Status st = ValidateQuota(key, value);
    ASSERT_FALSE(st.ok()) << key;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  }
}

TEST(ClientQuotasTest, TheMostSpecificEntityWinsAndDefaultsArePerName) {
  auto store = StoreWith({
      Set(Client(kDefault), "producer_byte_rate", 8),
      Set(Client("app"), "producer_byte_rate", 7),
      Set(User(kDefault), "producer_byte_rate", 6),
      Set(UserClient(kDefault, kDefault), "producer_byte_rate", 5),
      Set(UserClient(kDefault, "app"), "producer_byte_rate", 4),
      Set(User("alice"), "producer_byte_rate", 3),
      Set(UserClient("alice", kDefault), "producer_byte_rate", 2),
      Set(UserClient("alice", "app"), "producer_byte_rate", 1),
  });
  const QuotaSet& set = *store->Current();
  QuotaEntity bucket;
  EXPECT_EQ(set.Resolve("producer_byte_rate", "alice", "app", &bucket), 1);
  EXPECT_EQ(bucket, UserClient("alice", "app"));
  EXPECT_EQ(set.Resolve("producer_byte_rate", "alice", "other", &bucket), 2);
  EXPECT_EQ(bucket, UserClient("alice", "other"));  // a default is per client id
  EXPECT_EQ(set.Resolve("producer_byte_rate", "bob", "app", &bucket), 4);
  EXPECT_EQ(set.Resolve("producer_byte_rate", "bob", "x", &bucket), 5);
  EXPECT_EQ(bucket, UserClient("bob", "x"));
  EXPECT_FALSE(set.Resolve("consumer_byte_rate", "bob", "x", &bucket).has_value());

  auto clients = StoreWith({Set(Client(kDefault), "consumer_byte_rate", 8),
                            Set(Client("app"), "consumer_byte_rate", 7),
                            Set(User("carol"), "producer_byte_rate", 1)});
  EXPECT_EQ(clients->Current()->Resolve("consumer_byte_rate", "carol", "app", &bucket), 7);
  EXPECT_EQ(bucket, Client("app"));
  EXPECT_EQ(clients->Current()->Resolve("consumer_byte_rate", "carol", "b", &bucket), 8);
  EXPECT_EQ(bucket, Client("b"));
}

TEST(ClientQuotasTest, AlterChecksEachEntryAndRemovesEmptiedEntities) {
  std::vector<std::string> persisted;
  auto loaded = QuotaStore::Load("", [&](const std::string& j) {
    persisted.push_back(j);
    return Status::OK();
  });
  ASSERT_TRUE(loaded.ok());
  QuotaStore& store = **loaded;
  EXPECT_FALSE(store.any());
  std::vector<Status> r = store.Alter(
      {Set(User("a"), "producer_byte_rate", 100), Set(User("b"), "producer_byte_rate", 1.5)},
      /*validate_only=*/false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_FALSE(r[1].ok());
  EXPECT_TRUE(store.any());
  EXPECT_EQ(persisted.size(), 1u);
  // validate_only changes nothing and persists nothing.
  r = store.Alter({Set(User("c"), "consumer_byte_rate", 5)}, true);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(store.Current()->entries().size(), 1u);
  EXPECT_EQ(persisted.size(), 1u);
  // Removing the last key removes the entity; an unknown key in a removal is refused.
  r = store.Alter({QuotaAlteration{User("a"), {{"producer_byte_rate", 0, true}}},
                   QuotaAlteration{User("x"), {{"nonsense", 0, true}}}},
                  false);
  EXPECT_TRUE(r[0].ok());
  EXPECT_FALSE(r[1].ok());
  EXPECT_TRUE(store.Current()->empty());
  EXPECT_FALSE(store.any());
  // A key twice in one entry, an entity twice in one request.
  r = store.Alter(
      {QuotaAlteration{User("a"),
                       {{"producer_byte_rate", 1, false}, {"producer_byte_rate", 2, false}}},
       Set(User("d"), "producer_byte_rate", 1), Set(User("d"), "consumer_byte_rate", 1)},
      false);
  EXPECT_FALSE(r[0].ok());
  EXPECT_TRUE(r[1].ok());
  EXPECT_FALSE(r[2].ok());
}

TEST(ClientQuotasTest, AFailedPersistChangesNothing) {
  auto loaded = QuotaStore::Load("", [](const std::string&) { return IOError("disk full"); });
  ASSERT_TRUE(loaded.ok());
  std::vector<Status> r = (*loaded)->Alter({Set(User("a"), "producer_byte_rate", 100)}, false);
  EXPECT_EQ(r[0].code(), StatusCode::kIOError);
  EXPECT_TRUE((*loaded)->Current()->empty());
}

TEST(ClientQuotasTest, JsonRoundTripsAndMalformedJsonIsNamed) {
  auto store = StoreWith({Set(UserClient("alice", kDefault), "producer_byte_rate", 1024),
                          Set(Client(kDefault), "request_percentage", 12.5)});
  const std::string json = store->Current()->ToJson();
  auto back = QuotaSet::FromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->entries(), store->Current()->entries());
  for (auto [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"[", "not a JSON object"},
           {R"({"version": 2, "quotas": []})", "\"version\" is not 1"},
           {R"({"version": 1})", "no \"quotas\" array"},
           {R"({"version": 1, "quotas": [3]})", "entry 0 is not an object"},
           {R"({"version": 1, "quotas": [{"user": 5, "values": {"producer_byte_rate": 1}}]})",
            "\"user\" is not a string or null"},
           {R"({"version": 1, "quotas": [{"values": {"producer_byte_rate": 1}}]})",
            "Invalid empty client quota entity"},
           {R"({"version": 1, "quotas": [{"user": "a"}]})", "entry 0 has no \"values\""},
           {R"({"version": 1, "quotas": [{"user": "a", "values": {"producer_byte_rate": "x"}}]})",
            "is not a number"},
           {R"({"version": 1, "quotas": [{"user": "a", "values": {"bogus": 1}}]})",
            "Invalid configuration key bogus"},
           {R"({"version": 1, "quotas": [{"user": "a", "values": {"producer_byte_rate": 1}},)"
            R"( {"user": "a", "values": {"consumer_byte_rate": 1}}]})",
            "entry 1 repeats an entity"},
       }) {
    auto bad = QuotaSet::FromJson(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
}

TEST(ClientQuotasTest, DescribeFiltersAsKafka) {
  auto store = StoreWith({Set(User("alice"), "producer_byte_rate", 1),
                          Set(User(kDefault), "producer_byte_rate", 2),
                          Set(UserClient("alice", "app"), "producer_byte_rate", 3),
                          Set(Client("app"), "producer_byte_rate", 4)});
  const QuotaSet& set = *store->Current();
  auto count = [&](std::vector<QuotaFilterComponent> c, bool strict) {
    auto r = set.Describe(c, strict);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->size() : size_t{999};
  };
  EXPECT_EQ(count({}, false), 4u);
  EXPECT_EQ(count({}, true), 0u);
  EXPECT_EQ(count({{"user", 0, "alice"}}, false), 2u);
  EXPECT_EQ(count({{"user", 0, "alice"}}, true), 1u);
  EXPECT_EQ(count({{"user", 1, std::nullopt}}, false), 1u);
  EXPECT_EQ(count({{"user", 2, std::nullopt}}, false), 3u);
  EXPECT_EQ(count({{"user", 2, std::nullopt}, {"client-id", 0, "app"}}, true), 1u);
  for (auto [c, why] : std::vector<std::pair<std::vector<QuotaFilterComponent>, std::string>>{
           {{{"user", 0, "a"}, {"user", 1, std::nullopt}}, "cannot appear more than once"},
           {{{"user", 7, std::nullopt}}, "Unknown match type 7"},
           {{{"topic", 2, std::nullopt}}, "Custom entity type 'topic' not supported"},
           {{{"user", 0, std::nullopt}}, "An exact match for user needs a name"},
           {{{"user", 2, "alice"}}, "MATCH_TYPE_SPECIFIED, but also specified a match string"},
           {{{"user", 1, "alice"}}, "MATCH_TYPE_DEFAULT, but also specified a match string"},
           {{{"ip", 2, std::nullopt}, {"user", 2, std::nullopt}},
            "Invalid entity filter component combination"},
       }) {
    auto r = set.Describe(c, false);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

TEST(ClientQuotasTest, ABucketGivesOneSecondAndThrottlesTheDebt) {
  ManualClock clock;
  auto store = StoreWith({Set(User("alice"), "producer_byte_rate", 1000),
                          Set(User(kDefault), "request_percentage", 50)});
  ClientQuotas q(store, &clock);
  using K = ClientQuotas::Kind;
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 600), 0);  // a second's worth is there
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 400), 0);
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 500), 500);  // 500 bytes over at 1000/s
  clock.Advance(500);                                        // the debt paid
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 100), 100);
  clock.Advance(60'000);
  EXPECT_EQ(q.Record(K::kProduce, "alice", "other-client", 1000), 0);  // one user, one bucket
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 30'000), 30'000);      // 30 s of debt: 30 s
  EXPECT_EQ(q.Check(K::kProduce, "alice", "c").throttle_ms, 30'000);
  EXPECT_EQ(q.Check(K::kProduce, "alice", "c").rate, 1000);
  clock.Advance(61'000);
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 0), 0);  // paid, not forgotten in debt
  EXPECT_EQ(q.Record(K::kProduce, "alice", "c", 1e12), ClientQuotas::kMaxThrottleMs);
  EXPECT_EQ(q.Record(K::kProduce, "bob", "c", 1e9), 0);  // no quota for bob's bytes
  EXPECT_EQ(q.Record(K::kFetch, "alice", "c", 1e9), 0);
  // request_percentage 50: half a thread, 500 ms of handler time per second, per user.
  EXPECT_EQ(q.Record(K::kRequest, "bob", "c", 700), 200 * 1000 / 500);
  EXPECT_EQ(q.Record(K::kRequest, "carol", "c", 400), 0);
}

TEST(ClientQuotasTest, ATinyQuotaThrottlesTheLongestNotNever) {
  ManualClock clock;
  ClientQuotas q(StoreWith({Set(User("tiny"), "request_percentage", 1e-300)}), &clock);
  EXPECT_EQ(q.Record(ClientQuotas::Kind::kRequest, "tiny", "c", 5), ClientQuotas::kMaxThrottleMs);
}

}  // namespace
}  // namespace client_quotas_test
}  // namespace sluice::broker
