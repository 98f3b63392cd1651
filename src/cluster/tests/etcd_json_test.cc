// The gateway's JSON: request bodies, every response parser on what etcd 3.4 sends
// (captured from a real member), and on malformed input.
#include "cluster/etcd_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sluice::cluster {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kHeader =
    R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"5","raft_term":"2"})";

std::string Wrap(std::string_view fields) {
  return "{" + std::string(kHeader) + (fields.empty() ? "" : ",") + std::string(fields) + "}";
}

TEST(EtcdJsonTest, EncodesBytesAsBase64AndInt64AsStrings) {
  Json put =
      Json::parse(EncodePutRequest({.key = "foo", .value = std::string("\0\xff", 2), .lease = 7}));
  EXPECT_EQ(put["key"], "Zm9v");
  EXPECT_EQ(put["value"], "AP8=");
  EXPECT_EQ(put["lease"], "7");
  Json range = Json::parse(EncodeRangeRequest(
      {.key = "a", .range_end = PrefixRangeEnd("a"), .limit = 3, .revision = 9000000000}));
  EXPECT_EQ(range["range_end"], "Yg==");
  EXPECT_EQ(range["limit"], "3");
  EXPECT_EQ(range["revision"], "9000000000");
  Json txn = Json::parse(
      EncodeTxnRequest({.compares = {Compare::Version("k", CompareResult::kEqual, 0),
                                     Compare::Value("k", CompareResult::kNotEqual, "v"),
                                     Compare::ModRevision("k", CompareResult::kLess, 4),
                                     Compare::CreateRevision("k", CompareResult::kGreater, 2),
                                     Compare::Lease("k", CompareResult::kEqual, 11)},
                        .success = {TxnOp::Put("k", "v"), TxnOp::Get("k"), TxnOp::Delete("k")},
                        .failure = {TxnOp::Range({.key = "k", .range_end = "l"})}}));
  EXPECT_EQ(txn["compare"][0]["target"], "VERSION");
  EXPECT_EQ(txn["compare"][0]["version"], "0");
  EXPECT_EQ(txn["compare"][1]["target"], "VALUE");
  EXPECT_EQ(txn["compare"][1]["result"], "NOT_EQUAL");
  EXPECT_EQ(txn["compare"][1]["value"], "dg==");
  EXPECT_EQ(txn["compare"][2]["mod_revision"], "4");
  EXPECT_EQ(txn["compare"][2]["result"], "LESS");
  EXPECT_EQ(txn["compare"][3]["target"], "CREATE");
  EXPECT_EQ(txn["compare"][3]["result"], "GREATER");
  EXPECT_EQ(txn["compare"][4]["lease"], "11");
  EXPECT_TRUE(txn["success"][0].contains("request_put"));
  EXPECT_TRUE(txn["success"][1].contains("request_range"));
  EXPECT_TRUE(txn["success"][2].contains("request_delete_range"));
  EXPECT_EQ(txn["failure"][0]["request_range"]["range_end"], "bA==");
  Json watch = Json::parse(EncodeWatchCreateRequest({.key = "p",
                                                     .range_end = "q",
                                                     .start_revision = 12,
                                                     .prev_kv = true,
                                                     .progress_notify = true}));
  EXPECT_EQ(watch["create_request"]["start_revision"], "12");
  EXPECT_EQ(watch["create_request"]["progress_notify"], true);
  EXPECT_EQ(Json::parse(EncodeLeaseGrantRequest(2))["TTL"], "2");
  EXPECT_EQ(Json::parse(EncodeLeaseIdRequest(-5))["ID"], "-5");
}

TEST(EtcdJsonTest, PrefixRangeEndIncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(PrefixRangeEnd("abc"), "abd");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(PrefixRangeEnd(std::string("\xff", 1)), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(EtcdJsonTest, ParsesARangeWithUint64Ids) {
  auto r = ParseRangeResponse(Wrap(
      R"("kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"3","version":"2","value":"eA==","lease":"99"}],"count":"1","more":true)"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->header.cluster_id, 15118495548433857066ull);
  EXPECT_EQ(r->header.member_id, 13668033151171901709ull);
  EXPECT_EQ(r->header.revision, 5);
  EXPECT_EQ(r->header.raft_term, 2u);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "foo");
  EXPECT_EQ(r->kvs[0].value, "x");
  EXPECT_EQ(r->kvs[0].create_revision, 2);
  EXPECT_EQ(r->kvs[0].mod_revision, 3);
  EXPECT_EQ(r->kvs[0].version, 2);
  EXPECT_EQ(r->kvs[0].lease, 99);
  EXPECT_EQ(r->count, 1);
  EXPECT_TRUE(r->more);
}

TEST(EtcdJsonTest, MissingFieldsAreProto3Defaults) {
  auto r = ParseRangeResponse(Wrap(""));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->kvs.empty());
  EXPECT_EQ(r->count, 0);
  EXPECT_FALSE(r->more);
  // An empty value and a key without lease leave out "value" and "lease".
  auto kv = ParseRangeResponse(Wrap(
      R"("kvs":[{"key":"Zm9v","create_revision":"5","mod_revision":"5","version":"1"}],"count":"1")"));
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->kvs[0].value, "");
  EXPECT_EQ(kv->kvs[0].lease, 0);
  // A failed transaction has no "succeeded".
  auto txn = ParseTxnResponse(Wrap(
      R"("responses":[{"response_range":{"header":{"revision":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}}])"));
  ASSERT_TRUE(txn.ok()) << txn.status().ToString();
  EXPECT_FALSE(txn->succeeded);
  ASSERT_EQ(txn->responses.size(), 1u);
  EXPECT_EQ(std::get<RangeResponse>(txn->responses[0]).kvs[0].value, "bar");
  // A header-less body has a zero header.
  auto bare = ParseHeaderResponse("{}");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*bare, ResponseHeader{});
  // A keepalive of a lease that is gone: no TTL.
  auto ka = ParseLeaseKeepAliveResponse(R"({"result":{)" + std::string(kHeader) + R"(,"ID":"1"}})");
  ASSERT_TRUE(ka.ok()) << ka.status().ToString();
  EXPECT_EQ(ka->id, 1);
  EXPECT_EQ(ka->ttl, 0);
}

TEST(EtcdJsonTest, ParsesASucceededTxnOfEveryKind) {
  auto r = ParseTxnResponse(Wrap(
      R"("succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"},"prev_kv":{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}}},{"response_delete_range":{"header":{"revision":"3"},"deleted":"2"}},{"response_put":{}}])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->succeeded);
  ASSERT_EQ(r->responses.size(), 3u);
  const auto& put = std::get<PutResponse>(r->responses[0]);
  ASSERT_TRUE(put.prev_kv.has_value());
  EXPECT_EQ(put.prev_kv->value, "bar");
  EXPECT_EQ(put.header.revision, 3);
  EXPECT_EQ(std::get<DeleteResponse>(r->responses[1]).deleted, 2);
  EXPECT_FALSE(std::get<PutResponse>(r->responses[2]).prev_kv.has_value());
}

TEST(EtcdJsonTest, ParsesWatchMessages) {
  auto created =
      ParseWatchResponse(R"({"result":{)" + std::string(kHeader) + R"(,"created":true}})");
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(created->created);
  auto events = ParseWatchResponse(
      R"({"result":{)" + std::string(kHeader) +
      R"(,"events":[{"kv":{"key":"Zm9v","create_revision":"5","mod_revision":"5","version":"1"}},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"6"},"prev_kv":{"key":"Zm9v","create_revision":"5","mod_revision":"5","version":"1","value":"eA=="}}]}})");
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->events.size(), 2u);
  EXPECT_EQ(events->events[0].type, EventType::kPut);  // no "type": PUT
  EXPECT_EQ(events->events[1].type, EventType::kDelete);
  EXPECT_EQ(events->events[1].kv.version, 0);
  EXPECT_EQ(events->events[1].kv.mod_revision, 6);
  ASSERT_TRUE(events->events[1].prev_kv.has_value());
  EXPECT_EQ(events->events[1].prev_kv->value, "x");
  auto compacted = ParseWatchResponse(
      R"({"result":{"header":{"cluster_id":"1","raft_term":"2"},"canceled":true,"compact_revision":"4"}})");
  ASSERT_TRUE(compacted.ok());
  EXPECT_TRUE(compacted->canceled);
  EXPECT_EQ(compacted->compact_revision, 4);
}

TEST(EtcdJsonTest, ParsesStatus) {
  auto s = ParseStatusResponse(Wrap(
      R"("version":"3.4.23","dbSize":"36864","leader":"13668033151171901709","raftIndex":"8","raftTerm":"2","raftAppliedIndex":"8","dbSizeInUse":"20480")"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->version, "3.4.23");
  EXPECT_EQ(s->leader, 13668033151171901709ull);
  EXPECT_EQ(s->raft_term, 2u);
  EXPECT_EQ(s->raft_index, 8);
  EXPECT_EQ(s->db_size, 36864);
}

TEST(EtcdJsonTest, ErrorObjectsBecomeTheirStatus) {
  auto notfound = ParseLeaseRevokeResponse(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  ASSERT_FALSE(notfound.ok());
  EXPECT_EQ(notfound.status().code(), StatusCode::kNotFound);
  EXPECT_NE(notfound.status().message().find("requested lease not found"), std::string::npos);
  auto compacted = ParseRangeResponse(
      R"({"error":"etcdserver: mvcc: required revision has been compacted","code":11})");
  EXPECT_EQ(compacted.status().code(), StatusCode::kOutOfRange);
  auto unavailable = ParsePutResponse(R"({"error":"etcdserver: no leader","code":14})");
  EXPECT_EQ(unavailable.status().code(), StatusCode::kIOError);
  auto streamed =
      ParseWatchResponse(R"({"error":{"grpc_code":3,"http_code":400,"message":"bad"}})");
  EXPECT_EQ(streamed.status().code(), StatusCode::kInvalidArgument);
  auto in_result = ParseLeaseKeepAliveResponse(R"({"result":{"error":"boom","code":13}})");
  EXPECT_EQ(in_result.status().code(), StatusCode::kInternal);
  // A LeaseGrantResponse's own error field.
  EXPECT_FALSE(ParseLeaseGrantResponse(Wrap(R"("ID":"5","TTL":"2","error":"no space")")).ok());
  EXPECT_FALSE(ParseLeaseGrantResponse(Wrap(R"("TTL":"2")")).ok());  // no ID
}

// Every malformed body is an error naming what is wrong, never a crash or a half answer.
TEST(EtcdJsonTest, MalformedBodiesAreErrors) {
  const std::string full =
      Wrap(R"("kvs":[{"key":"Zm9v","mod_revision":"3","value":"eA=="}],"count":"1")");
  for (size_t n = 0; n < full.size(); ++n) {  // every truncation
    EXPECT_FALSE(ParseRangeResponse(full.substr(0, n)).ok()) << full.substr(0, n);
  }
  const char* bad[] = {
      "",
      "null",
      "[]",
      "\"text\"",
      "42",
      "{\"header\":[]}",
      "{\"header\":{\"revision\":\"x\"}}",
      "{\"header\":{\"revision\":\"\"}}",
      "{\"header\":{\"revision\":\" 5\"}}",
      "{\"header\":{\"revision\":\"5 \"}}",
      "{\"header\":{\"revision\":\"+5\"}}",
      "{\"header\":{\"revision\":\"0x10\"}}",
      "{\"header\":{\"revision\":\"9223372036854775808\"}}",  // INT64_MAX + 1
      "{\"header\":{\"revision\":9223372036854775808}}",
      "{\"header\":{\"revision\":1e3}}",
      "{\"header\":{\"revision\":1.5}}",
      "{\"header\":{\"revision\":true}}",
      "{\"header\":{\"revision\":{}}}",
      "{\"header\":{\"member_id\":\"-1\"}}",  // uint64
      "{\"header\":{\"member_id\":-1}}",
      "{\"header\":{\"cluster_id\":\"18446744073709551616\"}}",  // UINT64_MAX + 1
      "{\"kvs\":{}}",
      "{\"kvs\":[1]}",
      "{\"kvs\":[null]}",
      "{\"kvs\":[{\"key\":\"Zm9\"}]}",       // base64 not a multiple of 4
      "{\"kvs\":[{\"key\":\"Zm9v!!!!\"}]}",  // outside the alphabet
      "{\"kvs\":[{\"key\":\"Zh==\"}]}",      // non-canonical
      "{\"kvs\":[{\"key\":5}]}",
      "{\"kvs\":[{\"value\":[\"eA==\"]}]}",
      "{\"more\":\"true\"}",
      "{\"count\":\"1\"",
      "{\"count\":\"1\"}}",
      "{\"count\":\"1\"} trailing",
      "{\"result\":[]}",
      "{\"result\":\"x\"}",
  };
  for (const char* b : bad) EXPECT_FALSE(ParseRangeResponse(b).ok()) << b;
  EXPECT_TRUE(ParseRangeResponse("{\"header\":{\"revision\":\"9223372036854775807\"}}").ok());
  EXPECT_TRUE(ParseRangeResponse("{\"header\":{\"member_id\":\"18446744073709551615\"}}").ok());
  EXPECT_TRUE(ParseRangeResponse("{\"header\":{\"revision\":7}}").ok());  // a number, too

  const char* bad_txn[] = {
      "{\"succeeded\":1}",
      "{\"responses\":{}}",
      "{\"responses\":[5]}",
      "{\"responses\":[{}]}",
      "{\"responses\":[{\"response_put\":{},\"response_range\":{}}]}",
      "{\"responses\":[{\"response_put\":[]}]}",
      "{\"responses\":[{\"response_unknown\":{}}]}",
  };
  for (const char* b : bad_txn) EXPECT_FALSE(ParseTxnResponse(b).ok()) << b;

  const char* bad_watch[] = {
      "{\"result\":{\"events\":[{\"type\":\"PATCH\",\"kv\":{}}]}}",
      "{\"result\":{\"events\":[{\"type\":1,\"kv\":{}}]}}",
      "{\"result\":{\"events\":[{\"type\":\"PUT\"}]}}",  // no kv
      "{\"result\":{\"events\":[{\"kv\":\"x\"}]}}",
      "{\"result\":{\"events\":[{\"kv\":{},\"prev_kv\":7}]}}",
      "{\"result\":{\"compact_revision\":\"four\"}}",
      "{\"result\":{\"cancel_reason\":4}}",
  };
  for (const char* b : bad_watch) EXPECT_FALSE(ParseWatchResponse(b).ok()) << b;
  EXPECT_FALSE(ParseStatusResponse("{\"errors\":[1]}").ok());
  EXPECT_FALSE(ParseStatusResponse("{\"version\":3}").ok());
}

TEST(EtcdJsonTest, SplitterCutsAStreamAnywhere) {
  const std::string a = R"({"result":{"events":[{"kv":{"key":"e30="}}],"s":"}{\"[]"}})";
  const std::string b = R"({"result":{"header":{}}})";
  const std::string stream = a + "\n" + b + "\r\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    JsonObjectSplitter splitter(1 << 20);
    std::vector<std::string> out;
    ASSERT_TRUE(splitter.Feed(stream.substr(0, cut), &out).ok());
    ASSERT_TRUE(splitter.Feed(stream.substr(cut), &out).ok());
    ASSERT_EQ(out.size(), 2u) << cut;
    EXPECT_EQ(out[0], a);
    EXPECT_EQ(out[1], b);
    EXPECT_EQ(splitter.pending(), 0u);
  }
  JsonObjectSplitter byte_at_a_time(1 << 20);
  std::vector<std::string> out;
  for (char c : stream) ASSERT_TRUE(byte_at_a_time.Feed(std::string_view(&c, 1), &out).ok());
  EXPECT_EQ(out.size(), 2u);
}

TEST(EtcdJsonTest, SplitterRejectsGarbageAndOversizedObjects) {
  JsonObjectSplitter garbage(1 << 20);
  std::vector<std::string> out;
  EXPECT_FALSE(garbage.Feed("{} x {}", &out).ok());
  EXPECT_FALSE(garbage.Feed("{}", &out).ok());  // stays failed
  JsonObjectSplitter small(16);
  EXPECT_TRUE(small.Feed("{\"a\":\"0123", &out).ok());
  EXPECT_FALSE(small.Feed("456789abcdef\"}", &out).ok());
}

}  // namespace
}  // namespace sluice::cluster
