// The lake's storage seam (storage.h) on the local file system, S3 locations and settings,
// and the object cache (object_cache.h) over a storage whose reads are counted, delayed
// and failed on demand.
#include "lake/storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "lake/object_cache.h"
#include "lake/table_files.h"

namespace sluice::lake {
namespace storage_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sluice-storage-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Locations, S3SchemesAreOneAndLocalPathsLoseTheirScheme) {
  EXPECT_TRUE(IsS3Location("s3://b/k"));
  EXPECT_TRUE(IsS3Location("s3a://b/k"));
  EXPECT_TRUE(IsS3Location("s3n://b/k"));
  EXPECT_FALSE(IsS3Location("/a/b"));
  EXPECT_FALSE(IsS3Location("file:///a/b"));
  EXPECT_FALSE(IsS3Location("gs://b/k"));
  EXPECT_EQ(NormalLocation("s3a://b/a/k/"), "s3://b/a/k");
  EXPECT_EQ(NormalLocation("s3n://b/k"), "s3://b/k");
  EXPECT_EQ(NormalLocation("file:///a/b/"), "/a/b");
  EXPECT_EQ(NormalLocation("file:/a/b"), "/a/b");
  auto bk = SplitS3Location("s3a://bucket/a/b.parquet");
  ASSERT_TRUE(bk.ok()) << bk.status().message();
  EXPECT_EQ(bk->first, "bucket");
  EXPECT_EQ(bk->second, "a/b.parquet");
  auto bare = SplitS3Location("s3://bucket");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->second, "");
  EXPECT_EQ(SplitS3Location("s3:///k").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitS3Location("/a/b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StorageFor("gs://b/k").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FileUri("s3://b/t"), "s3://b/t");
  EXPECT_EQ(FileUri("/a/t"), "file:///a/t");
}

TEST(LocalStorage, ReadsWritesCreatesListsAndDeletes) {
  TempDir dir;
  Result<const Storage*> s = StorageFor(dir.path());
  ASSERT_TRUE(s.ok());
  const Storage& st = **s;
  EXPECT_TRUE(st.local());
  const std::string a = dir.path() + "/x/y/a.bin";
  // No directory is made (a table moved away must not come back by a write).
  EXPECT_FALSE(st.Write(a, "hello world").ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/x"));
  fs::create_directories(dir.path() + "/x/y");
  fs::create_directories(dir.path() + "/m");
  ASSERT_TRUE(st.Write(a, "hello world").ok());
  EXPECT_EQ(*st.Read(a), "hello world");
  EXPECT_EQ(*st.Read("file://" + a), "hello world");
  EXPECT_EQ(*st.ReadRange(a, 6, 100), "world");
  EXPECT_EQ(*st.ReadRange(a, 0, 5), "hello");
  EXPECT_EQ(*st.ReadRange(a, 50, 5), "");
  EXPECT_EQ(**st.Size(a), 11u);
  EXPECT_FALSE(st.Size(dir.path() + "/none")->has_value());
  EXPECT_EQ(st.Read(dir.path() + "/none").status().code(), StatusCode::kNotFound);

  const std::string v = dir.path() + "/m/v1.json";
  ASSERT_TRUE(st.CreateExclusive(v, "first").ok());
  Status again = st.CreateExclusive(v, "second");
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.message();
  EXPECT_EQ(*st.Read(v), "first");

  const std::string copy = dir.path() + "/up/copied.bin";
  ASSERT_TRUE(st.Upload(a, copy).ok());
  EXPECT_EQ(*st.Read(copy), "hello world");

  auto listed = st.List(dir.path());
  ASSERT_TRUE(listed.ok());
  std::map<std::string, uint64_t> names;
  for (const StoredObject& o : *listed) names[o.location] = o.size;
  EXPECT_EQ(names.size(), 3u);  // no temporary file is left beside the create
  EXPECT_EQ(names[a], 11u);
  EXPECT_EQ(names[v], 5u);
  EXPECT_TRUE(st.List(dir.path() + "/none")->empty());

  ASSERT_TRUE(st.Delete(a).ok());
  ASSERT_TRUE(st.Delete(a).ok());  // gone already: fine
  EXPECT_FALSE(st.Size(a)->has_value());
}

TEST(S3Settings, TheConfigOverridesTheEnvironmentAndBadValuesNameTheirKey) {
  ::setenv("AWS_ACCESS_KEY_ID", "env-key", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
  ::setenv("AWS_REGION", "eu-west-3", 1);
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
  ::unsetenv("AWS_ENDPOINT_URL_S3");
  auto env = S3SettingsFrom(Config());
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->options.access_key_id, "env-key");
  EXPECT_EQ(env->options.region, "eu-west-3");
  EXPECT_EQ(env->options.endpoint, "http://127.0.0.1:9000");

  auto config = Config::Parse(
      "s3:\n  endpoint: http://localhost:7480\n  region: us-east-2\n  access_key_id: cfg-key\n"
      "  secret_access_key: cfg-secret\n  path_style: false\n  cache_bytes: 64MiB\n"
      "  request_timeout: 5s\n  max_retries: 7\n",
      "t.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto s = S3SettingsFrom(*config);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->options.endpoint, "http://localhost:7480");
  EXPECT_EQ(s->options.region, "us-east-2");
  EXPECT_EQ(s->options.access_key_id, "cfg-key");
  EXPECT_EQ(s->options.secret_access_key, "cfg-secret");
  EXPECT_EQ(s->options.path_style, std::optional<bool>(false));
  EXPECT_EQ(s->cache_bytes, 64u << 20);
  EXPECT_EQ(s->options.request_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(s->options.max_retries, 7);

  for (const char* bad :
       {"s3: {endpoint: 'ftp://x'}", "s3: {endpoint: 'http://u:p@h'}", "s3: {region: ''}",
        "s3: {cache_bytes: 10}", "s3: {part_size: 1MiB}", "s3: {max_retries: -1}",
        "s3: {request_timeout: 5}", "s3: {path_style: maybe}"}) {
    auto c = Config::Parse(bad, "bad.yaml");
    ASSERT_TRUE(c.ok()) << bad;
    auto r = S3SettingsFrom(*c);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("s3.")) << bad;
  }
  // A bad endpoint in the environment is the error of the first S3 use, not before.
  ::setenv("AWS_ENDPOINT_URL", "not a url", 1);
  auto bad_env = S3SettingsFrom(Config());
  ASSERT_TRUE(bad_env.ok()) << bad_env.status().message();
  ConfigureS3(*bad_env);
  Result<const Storage*> unusable = StorageFor("s3://bucket/t");
  EXPECT_EQ(unusable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(unusable.status().message(), HasSubstr("not a url"));
  EXPECT_THAT(unusable.status().message(), Not(HasSubstr("env-secret")));
  ConfigureS3(S3Settings());
  for (const char* name :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"}) {
    ::unsetenv(name);
  }
}

TEST(S3Settings, WithoutKeysAnS3LocationSaysWhatToSet) {
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) ::unsetenv(name);
  ConfigureS3(*S3SettingsFrom(Config()));
  Result<const Storage*> s = StorageFor("s3://bucket/t");
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("AWS_ACCESS_KEY_ID"));
  // A table there cannot be loaded, and says why.
  TableFiles files("s3://bucket/t");
  EXPECT_THAT(files.CurrentVersion().status().message(), HasSubstr("AWS_ACCESS_KEY_ID"));
}

// A storage of objects in memory whose reads can be slowed and failed, counting them.
class MemoryStorage final : public Storage {
 public:
  void Put(const std::string& location, std::string bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    objects_[location] = std::move(bytes);
  }
  int reads(const std::string& location) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reads_.find(location);
    return it == reads_.end() ? 0 : it->second;
  }
  std::atomic<int> delay_ms{0};
  std::atomic<bool> fail{false};

  Result<std::string> Read(const std::string& location) const override {
    return ReadRange(location, 0, UINT64_MAX);
  }
  Result<std::string> ReadRange(const std::string& location, uint64_t offset,
                                uint64_t length) const override {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    std::lock_guard<std::mutex> lock(mu_);
    if (offset == 0) ++reads_[location];
    if (fail) return IOError("S3 GetObject {}: HTTP 503", location);
    auto it = objects_.find(location);
    if (it == objects_.end()) return NotFoundError("{}: HTTP 404", location);
    if (offset >= it->second.size()) return std::string();
    return it->second.substr(offset, length);
  }
  Result<std::optional<uint64_t>> Size(const std::string&) const override {
    return UnimplementedError("not used");
  }
  Status Write(const std::string&, std::string_view) const override {
    return UnimplementedError("not used");
  }
  Status CreateExclusive(const std::string&, std::string_view) const override {
    return UnimplementedError("not used");
  }
  Status Upload(const std::string&, const std::string&) const override {
    return UnimplementedError("not used");
  }
  Status Delete(const std::string&) const override { return UnimplementedError("not used"); }
  Result<std::vector<StoredObject>> List(const std::string&) const override {
    return UnimplementedError("not used");
  }
  bool local() const override { return false; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> objects_;
  mutable std::map<std::string, int> reads_;
};

std::string FileText(const std::string& path) { return *ReadWholeFile(path); }

TEST(ObjectCache, CopiesAreLocalFilesSharedByReadersAndEvictedLeastRecentlyUsed) {
  TempDir dir;
  MemoryStorage s3;
  for (int i = 0; i < 4; ++i) s3.Put("s3://b/f" + std::to_string(i), std::string(400, 'a' + i));
  auto cache = ObjectCache::Open(s3, dir.path(), 1000);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  auto first = (*cache)->Fetch({"s3://b/f0", "s3://b/f1"}, {400, 400});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(FileText((*first)[0]->path()), std::string(400, 'a'));
  EXPECT_EQ(FileText((*first)[1]->path()), std::string(400, 'b'));
  EXPECT_EQ((*first)[0]->size(), 400u);

  // Held: a third object that does not fit with them is refused, naming the setting.
  auto refused = (*cache)->Fetch({"s3://b/f2"}, {400});
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("s3.cache_bytes"));
  EXPECT_EQ(s3.reads("s3://b/f2"), 0);  // nothing fetched for it

  // f1 used again, then both let go: f0 is the least recently used, evicted for f2.
  std::string f0_path = (*first)[0]->path();
  auto again = (*cache)->Fetch({"s3://b/f1"}, {400});
  ASSERT_TRUE(again.ok());
  first->clear();
  again->clear();
  auto third = (*cache)->Fetch({"s3://b/f2"}, {400});
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_FALSE(fs::exists(f0_path));
  auto f1 = (*cache)->Fetch({"s3://b/f1"}, {400});
  ASSERT_TRUE(f1.ok());
  EXPECT_EQ(s3.reads("s3://b/f1"), 1);  // still cached
  ObjectCacheStats stats = (*cache)->stats();
  EXPECT_EQ(stats.downloads, 3);
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_LE(stats.bytes, 1000u);

  // More than the whole budget in one request: refused before any download.
  auto huge = (*cache)->Fetch({"s3://b/f3"}, {2000});
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(), HasSubstr("s3.cache_bytes"));
  EXPECT_EQ(s3.reads("s3://b/f3"), 0);
}

// Chunks of an object (a remote segment's, docs/design/0025): each cached on its own,
// apart from the whole object, within the budget.
TEST(ObjectCache, RangesAreCachedApartFromTheWholeObject) {
  TempDir dir;
  MemoryStorage s3;
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes += static_cast<char>('a' + i % 26);
  s3.Put("s3://b/seg", bytes);
  auto cache = ObjectCache::Open(s3, dir.path(), 1000, 8, "tiered_storage");
  ASSERT_TRUE(cache.ok());
  auto mid = (*cache)->FetchRange("s3://b/seg", 100, 300);
  ASSERT_TRUE(mid.ok()) << mid.status().message();
  EXPECT_EQ(FileText((*mid)->path()), bytes.substr(100, 300));
  EXPECT_EQ((*mid)->size(), 300u);
  auto again = (*cache)->FetchRange("s3://b/seg", 100, 300);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->path(), (*mid)->path());
  EXPECT_EQ((*cache)->stats().downloads, 1);
  auto tail = (*cache)->FetchRange("s3://b/seg", 900, 300);  // fewer past the end
  ASSERT_TRUE(tail.ok()) << tail.status().message();
  EXPECT_EQ(FileText((*tail)->path()), bytes.substr(900));
  auto other = (*cache)->FetchRange("s3://b/seg", 100, 200);  // another range: its own copy
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->path(), (*mid)->path());
  EXPECT_EQ(FileText((*other)->path()), bytes.substr(100, 200));
  EXPECT_EQ((*cache)->FetchRange("s3://b/seg", 0, 0).status().code(), StatusCode::kInvalidArgument);
  // The budget counts ranges: held, these leave no room for 600 more.
  auto refused = (*cache)->FetchRange("s3://b/seg", 0, 600);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("tiered_storage.cache_bytes"));
  EXPECT_EQ((*cache)->FetchRange("s3://nope/x", 0, 10).status().code(), StatusCode::kNotFound);
}

TEST(ObjectCache, ConcurrentReadersOfOneObjectShareOneDownload) {
  TempDir dir;
  MemoryStorage s3;
  s3.Put("s3://b/big", std::string(1000, 'z'));
  s3.delay_ms = 200;
  auto cache = ObjectCache::Open(s3, dir.path(), 1 << 20);
  ASSERT_TRUE(cache.ok());
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    readers.emplace_back([&] {
      auto r = (*cache)->Fetch({"s3://b/big"}, {1000});
      if (r.ok() && FileText((*r)[0]->path()) == std::string(1000, 'z')) ++ok;
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(s3.reads("s3://b/big"), 1);
}

TEST(ObjectCache, AFailedDownloadIsEveryWaitersErrorAndIsTriedAgainLater) {
  TempDir dir;
  MemoryStorage s3;
  s3.Put("s3://b/x", "bytes");
  s3.fail = true;
  s3.delay_ms = 100;
  auto cache = ObjectCache::Open(s3, dir.path(), 1 << 20);
  ASSERT_TRUE(cache.ok());
  std::vector<Status> got(3);
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&, i] { got[i] = (*cache)->Fetch({"s3://b/x"}, {5}).status(); });
  }
  for (std::thread& t : readers) t.join();
  for (const Status& st : got) {
    EXPECT_EQ(st.code(), StatusCode::kIOError) << st.message();
    EXPECT_THAT(st.message(), HasSubstr("s3://b/x"));
  }
  EXPECT_EQ((*cache)->stats().bytes, 0u);  // its reservation given back
  s3.fail = false;
  auto r = (*cache)->Fetch({"s3://b/x"}, {5});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(FileText((*r)[0]->path()), "bytes");
  EXPECT_EQ(s3.reads("s3://b/missing"), 0);
  EXPECT_EQ((*cache)->Fetch({"s3://b/missing"}, {1}).status().code(), StatusCode::kNotFound);
}

TEST(ObjectCache, ADirectoryLeftByAProcessGoneIsRemovedAndOursAtTheEnd) {
  TempDir dir;
  MemoryStorage s3;
  // A pid that is not running (pid_max is far below this).
  const std::string stale = dir.path() + "/999999999";
  fs::create_directories(stale);
  std::string ours;
  {
    auto cache = ObjectCache::Open(s3, dir.path(), 1 << 20);
    ASSERT_TRUE(cache.ok());
    ours = (*cache)->dir();
    EXPECT_TRUE(fs::is_directory(ours));
  }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(ours));
}

}  // namespace
}  // namespace storage_test
}  // namespace sluice::lake
