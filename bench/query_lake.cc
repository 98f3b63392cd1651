#include "bench/query_lake.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "base/config.h"
#include "bench/bench_util.h"
#include "bench/child_process.h"
#include "bench/kafka_phases.h"  // SelfCpuSeconds
#include "bench/machine_info.h"
#include "duck/database.h"
#include "lake/object_cache.h"
#include "lake/storage.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "query/engine.h"
#include "s3/s3_client.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The object cache downloads in ranges of this size (lake/object_cache.cc); the bandwidth
// probe reads the same way.
constexpr uint64_t kRange = 32ULL << 20;
constexpr const char* kTables[] = {"sales", "products"};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The marker of a complete copy: what it was made from, so a copy of other data (another
// generator, a regenerated dataset) is not taken for this one.
Json CopyMarker(const std::vector<std::pair<std::string, uint64_t>>& files) {
  Json list = Json::array();
  for (const auto& [name, size] : files) list.push_back({{"file", name}, {"bytes", size}});
  return {{"copy_of", "sluice bench query"}, {"files", list}};
}

// Every live data file of the current snapshot of `table`, as its manifest entry has it.
Result<std::vector<lake::DataFile>> LiveFiles(const lake::Table& table) {
  ASSIGN_OR_RETURN(auto manifests, table.CurrentManifests());
  std::vector<lake::DataFile> out;
  for (const auto& [manifest, entries] : manifests) {
    for (const lake::ManifestEntry& e : entries) {
      if (e.status != lake::EntryStatus::kDeleted) out.push_back(e.file);
    }
  }
  return out;
}

Status RemovePrefix(const std::string& prefix) {
  ASSIGN_OR_RETURN(const lake::Storage* storage, lake::StorageFor(prefix));
  ASSIGN_OR_RETURN(std::vector<lake::StoredObject> objects, storage->List(prefix));
  for (const lake::StoredObject& o : objects) RETURN_IF_ERROR(storage->Delete(o.location));
  return Status::OK();
}

}  // namespace

Result<S3Copy> EnsureS3Copy(const QueryDataset& local, const std::string& s3_warehouse) {
  S3Copy copy;
  copy.warehouse =
      lake::NormalLocation(s3_warehouse) + "/" + fs::path(local.dir).filename().string();
  ASSIGN_OR_RETURN(const lake::Storage* storage, lake::StorageFor(copy.warehouse));

  // What the copy must hold: every live data file of both local tables.
  std::map<std::string, lake::Table> tables;
  std::map<std::string, std::vector<lake::DataFile>> files;
  std::vector<std::pair<std::string, uint64_t>> listing;
  for (const char* name : kTables) {
    std::string root = fmt::format("{}/bench/{}", local.warehouse, name);
    ASSIGN_OR_RETURN(lake::Table t, lake::Table::Load(root));
    ASSIGN_OR_RETURN(std::vector<lake::DataFile> f, LiveFiles(t));
    std::sort(f.begin(), f.end(), [](const lake::DataFile& a, const lake::DataFile& b) {
      return a.file_path < b.file_path;
    });
    for (const lake::DataFile& d : f) {
      listing.emplace_back(fmt::format("{}/{}", name, fs::path(d.file_path).filename().string()),
                           static_cast<uint64_t>(d.file_size_in_bytes));
      copy.bytes += static_cast<uint64_t>(d.file_size_in_bytes);
      ++copy.files;
    }
    tables.emplace(name, std::move(t));
    files.emplace(name, std::move(f));
  }
  const Json marker = CopyMarker(listing);
  const std::string marker_location = copy.warehouse + "/complete.json";
  Result<std::string> found = storage->Read(marker_location);
  if (found.ok()) {
    auto j = Json::parse(*found, nullptr, false);
    if (!j.is_discarded() && j == marker) return copy;
    fmt::print(stderr, "sluice bench query: {} holds a copy of other data; copying again\n",
               copy.warehouse);
  } else if (found.status().code() != StatusCode::kNotFound) {
    return found.status().WithContext("reading the S3 copy's complete.json");
  }

  auto start = std::chrono::steady_clock::now();
  // Whatever an interrupted copy left (a table created, files half uploaded) goes first:
  // appending to it would count its files twice.
  RETURN_IF_ERROR(RemovePrefix(copy.warehouse));
  fmt::print(stderr, "sluice bench query: copying the tables to {} ({} files, {})\n",
             copy.warehouse, copy.files, FormatBinaryBytes(copy.bytes));
  for (const char* name : kTables) {
    const lake::Table& t = tables.at(name);
    const std::string root = fmt::format("{}/bench/{}", copy.warehouse, name);
    std::vector<std::pair<std::string, std::string>> uploads;
    std::vector<lake::DataFile> remote;
    for (const lake::DataFile& d : files.at(name)) {
      ASSIGN_OR_RETURN(std::string path, lake::LocalPath(d.file_path));
      lake::DataFile r = d;
      r.file_path = fmt::format("{}/data/{}", root, fs::path(path).filename().string());
      uploads.emplace_back(path, r.file_path);
      remote.push_back(std::move(r));
    }
    RETURN_IF_ERROR(lake::UploadAll(uploads));
    const lake::TableMetadata& m = t.metadata();
    const lake::Schema* schema = m.CurrentSchema();
    const lake::PartitionSpec* spec = m.DefaultSpec();
    if (schema == nullptr || spec == nullptr)
      return InternalError("{}: no current schema or default spec", name);
    ASSIGN_OR_RETURN(lake::Table s3_table, lake::Table::Create(root, *schema, *spec, m.properties));
    // The data files carry the local table's field ids: the copy must have the same ones.
    const lake::Schema* made = s3_table.metadata().CurrentSchema();
    if (made == nullptr || made->fields != schema->fields) {
      return InternalError("the S3 table {} got other field ids than the local table", root);
    }
    auto appended = s3_table.Append(remote, [](const lake::TableMetadata&) {
      return Result<std::map<std::string, std::string>>(std::map<std::string, std::string>{});
    });
    if (!appended.ok()) return appended.status().WithContext(fmt::format("committing {}", root));
  }
  RETURN_IF_ERROR(storage->Write(marker_location, marker.dump() + "\n"));
  copy.uploaded = true;
  copy.upload_s = Seconds(start);
  return copy;
}

double S3Bandwidth::single_median() const { return Median(single_mb_per_s); }
double S3Bandwidth::parallel_median() const { return Median(parallel_mb_per_s); }

double CpuSplit::other_s() const {
  if (machine_s < 0 || self_s < 0) return -1;
  return std::max(0.0, machine_s - self_s - std::max(0.0, store_s) - std::max(0.0, child_s));
}

CpuMeter::CpuMeter(const ObjectStore& store)
    : store_(store),
      start_(std::chrono::steady_clock::now()),
      self_(kafka_phases::SelfCpuSeconds()),
      store_cpu_(CpuSecondsOf(store.pids)),
      machine_(MachineBusyCpuSeconds()) {}

void CpuMeter::AddTo(CpuSplit& split) const {
  auto add = [](double& into, double start, double now) {
    if (start < 0 || now < 0) return;
    into = std::max(0.0, into) + (now - start);
  };
  split.wall_s += Seconds(start_);
  add(split.self_s, self_, kafka_phases::SelfCpuSeconds());
  add(split.store_s, store_cpu_, CpuSecondsOf(store_.pids));
  add(split.machine_s, machine_, MachineBusyCpuSeconds());
}

Result<std::unique_ptr<S3Probe>> S3Probe::Create(const std::string& prefix, uint64_t bytes,
                                                 const std::string& work_dir,
                                                 const ObjectStore& store) {
  std::string location =
      fmt::format("{}/bandwidth-probe-{}.bin", lake::NormalLocation(prefix), ::getpid());
  ASSIGN_OR_RETURN(const lake::Storage* storage, lake::StorageFor(location));
  // Bytes that do not compress (a store could), written once to a local file.
  const std::string path = work_dir + "/bandwidth-probe.bin";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::mt19937_64 rng(42);
    std::vector<uint64_t> block(1 << 17);  // 1 MiB
    for (uint64_t done = 0; done < bytes;) {
      for (uint64_t& w : block) w = rng();
      uint64_t n = std::min<uint64_t>(bytes - done, block.size() * sizeof(uint64_t));
      out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
      done += n;
    }
    if (!out) return IOError("cannot write {}", path);
  }
  std::unique_ptr<S3Probe> probe(new S3Probe(*storage, location, bytes, store));
  auto start = std::chrono::steady_clock::now();
  Status uploaded = storage->Upload(path, location);
  std::error_code ec;
  fs::remove(path, ec);
  RETURN_IF_ERROR(uploaded);
  probe->upload_mb_per_s_ = static_cast<double>(bytes) / 1e6 / Seconds(start);
  return probe;
}

S3Probe::~S3Probe() { (void)storage_.Delete(location_); }

Result<double> S3Probe::Read(int streams, CpuSplit* cpu) const {
  const uint64_t ranges = (bytes_ + kRange - 1) / kRange;
  std::atomic<uint64_t> next{0}, moved{0};
  std::mutex mu;
  Status failed;  // guarded by mu
  auto reader = [&] {
    for (uint64_t r = next++; r < ranges; r = next++) {
      Result<std::string> piece = storage_.ReadRange(location_, r * kRange, kRange);
      if (!piece.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = piece.status();
        return;
      }
      moved += piece->size();
    }
  };
  auto start = std::chrono::steady_clock::now();
  CpuMeter meter(store_);
  if (streams <= 1) {
    reader();
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < streams; ++t) threads.emplace_back(reader);
    for (std::thread& t : threads) t.join();
  }
  double s = Seconds(start);
  if (cpu != nullptr) meter.AddTo(*cpu);
  RETURN_IF_ERROR(failed);
  if (moved != bytes_)
    return InternalError("{}: read {} bytes of {}", location_, moved.load(), bytes_);
  return static_cast<double>(bytes_) / 1e6 / s;
}

Result<S3Bandwidth> MeasureS3Bandwidth(const S3Probe& probe, int repeats, int streams) {
  S3Bandwidth b;
  b.object = probe.location();
  b.object_bytes = probe.bytes();
  b.streams = streams;
  b.upload_mb_per_s = probe.upload_mb_per_s();
  for (int i = 0; i < repeats; ++i) {
    ASSIGN_OR_RETURN(double mbps, probe.Read(1, &b.single_cpu));
    b.single_mb_per_s.push_back(mbps);
  }
  for (int i = 0; i < repeats; ++i) {
    ASSIGN_OR_RETURN(double mbps, probe.Read(streams, &b.parallel_cpu));
    b.parallel_mb_per_s.push_back(mbps);
  }
  return b;
}

namespace {

// The value of `name` in /proc/<pid>/environ, or "".
std::string EnvironOf(const std::string& pid, std::string_view name) {
  std::string env = ReadFile(fmt::format("/proc/{}/environ", pid));
  std::string key = std::string(name) + "=";
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, key.size(), key) == 0)
      return env.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return "";
}

std::string CommOf(const std::string& pid) {
  std::string comm = ReadFile(fmt::format("/proc/{}/comm", pid));
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

std::vector<std::string> AllPids() {
  std::vector<std::string> out;
  DIR* procs = ::opendir("/proc");
  if (procs == nullptr) return out;
  while (dirent* p = ::readdir(procs)) {
    if (p->d_name[0] >= '0' && p->d_name[0] <= '9') out.emplace_back(p->d_name);
  }
  ::closedir(procs);
  return out;
}

}  // namespace

double CpuSecondsOf(const std::vector<pid_t>& pids) {
  if (pids.empty()) return -1;
  double total = 0;
  for (pid_t pid : pids) total += std::max(0.0, ProcessCpuSeconds(pid));
  return total;
}

double MachineBusyCpuSeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu") {
    return -1;
  }
  return static_cast<double>(user + nice + system + irq + softirq + steal) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

ObjectStore FindObjectStore(const std::string& endpoint) {
  ObjectStore store;
  Result<s3::Endpoint> ep = s3::ParseEndpoint(endpoint);
  if (!ep.ok()) {
    store.description = "unknown";
    return store;
  }
  const std::string& host = ep->host;
  if (host != "127.0.0.1" && host != "localhost" && host != "::1") {
    store.description = "not on this machine";
    return store;
  }
  uint16_t port = ep->port != 0 ? ep->port : (ep->scheme == "https" ? 443 : 80);
  // The listening sockets on that port (state 0A), by inode.
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(ReadFile(table));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;
      if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) != port) continue;
      inodes.insert("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) {
    store.description = fmt::format("nothing listens on port {} here", port);
    return store;
  }
  std::string listener;
  for (const std::string& pid : AllPids()) {
    std::string fd_dir = fmt::format("/proc/{}/fd", pid);
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    bool found = false;
    while (dirent* fd = ::readdir(fds)) {
      char target[128];
      ssize_t n = ::readlink((fd_dir + "/" + fd->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (inodes.count(target) != 0) {
        found = true;
        break;
      }
    }
    ::closedir(fds);
    if (found) {
      listener = pid;
      break;
    }
  }
  if (listener.empty()) {
    store.description = fmt::format("a process on port {} (not found in /proc)", port);
    return store;
  }
  std::string cmdline = ReadFile(fmt::format("/proc/{}/cmdline", listener));
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
  store.description = fmt::format("{}, pid {}: {}", CommOf(listener), listener, cmdline);
  store.pids.push_back(static_cast<pid_t>(std::stol(listener)));
  // A radosgw's cluster: the processes started with the same CEPH_CONF.
  const std::string conf = EnvironOf(listener, "CEPH_CONF");
  if (!conf.empty()) {
    std::string others;
    for (const std::string& pid : AllPids()) {
      if (pid == listener || EnvironOf(pid, "CEPH_CONF") != conf) continue;
      std::string comm = CommOf(pid);
      if (!comm.starts_with("ceph-")) continue;
      store.pids.push_back(static_cast<pid_t>(std::stol(pid)));
      others += fmt::format("{}{} (pid {})", others.empty() ? "" : ", ", comm, pid);
    }
    if (!others.empty()) store.description += fmt::format("; its cluster: {}", others);
  }
  return store;
}

int RunLakeQueryChild(const LakeChildOptions& o) {
  auto fail = [&](const Status& st) {
    std::fprintf(stderr, "sluice bench query-child: %s: %s\n", o.query.c_str(),
                 st.ToString().c_str());
    return 1;
  };
  const bool s3 = lake::IsS3Location(o.warehouse);
  if (s3) {
    // The object cache in the run's own directory, so that it starts empty.
    Config config;
    if (!o.s3_cache_dir.empty()) config.Set("s3.cache_dir", o.s3_cache_dir);
    Result<lake::S3Settings> settings = lake::S3SettingsFrom(config);
    if (!settings.ok()) return fail(settings.status());
    lake::ConfigureS3(std::move(*settings));
  }
  Result<std::unique_ptr<duck::Database>> db =
      duck::Database::Open({.memory_limit_bytes = o.memory_limit_bytes,
                            .threads = o.threads,
                            .temp_directory = o.temp_dir});
  if (!db.ok()) return fail(db.status());
  Result<std::unique_ptr<duck::Connection>> conn = duck::Connection::Open(**db);
  if (!conn.ok()) return fail(conn.status());
  duck::Connection& c = **conn;
  query::QueryEngine engine(
      {.warehouse = o.warehouse, .memory_limit_bytes = o.memory_limit_bytes, .threads = o.threads});
  if (Status st = engine.OpenDatabase(c); !st.ok()) return fail(st);

  lake::ObjectCacheStats before;
  Json repeats = Json::array(), answer = Json::array(), columns = Json::array();
  for (int i = 0; i < o.repeat; ++i) {
    // As the server runs a simple query: planned once with its steps allowed (the lake
    // stage, which on S3 fetches the files the plan keeps, then any partitioned rewrite's
    // steps), then run.
    auto start = std::chrono::steady_clock::now();
    Result<query::PlannedStatement> planned = engine.Plan(c, o.sql, /*allow_steps=*/true);
    if (!planned.ok()) return fail(planned.status());
    double plan_s = Seconds(start);
    auto run_start = std::chrono::steady_clock::now();
    Result<duck::QueryResult> result = c.Query(planned->sql);
    double run_s = Seconds(run_start);
    double elapsed = Seconds(start);
    if (planned->cleanup) planned->cleanup(c);
    if (!result.ok()) return fail(result.status());
    if (result->row_count() != 1 || result->chunk_count() < 1)
      return fail(InternalError("{} returned {} rows, not 1", o.query, result->row_count()));
    Json values = Json::array(), names = Json::array();
    duck::ResultChunk chunk = result->chunk(0);
    for (size_t k = 0; k < result->column_count(); ++k) {
      names.push_back(result->column_name(k));
      if (result->column_type(k) != duck::ColumnType::kInt64) {
        return fail(InternalError("column {} is {}, not BIGINT", result->column_name(k),
                                  result->column_type_name(k)));
      }
      values.push_back(chunk.IsNull(k, 0) ? std::string("NULL")
                                          : std::to_string(chunk.GetInt64(k, 0)));
    }
    if (i == 0) {
      answer = values;
      columns = names;
    } else if (values != answer) {
      return fail(
          InternalError("repeat {} answered {}, repeat 1 {}", i + 1, values.dump(), answer.dump()));
    }
    Json r = {{"elapsed_s", elapsed}, {"plan_s", plan_s}, {"run_s", run_s}};
    lake::ObjectCacheStats now;
    if (s3) {
      Result<lake::ObjectCache*> cache = lake::S3ObjectCache();
      if (!cache.ok()) return fail(cache.status());
      now = (*cache)->stats();
    }
    r["downloads"] = now.downloads - before.downloads;
    r["downloaded_bytes"] = now.downloaded_bytes - before.downloaded_bytes;
    r["hits"] = now.hits - before.hits;
    r["cache_bytes"] = now.bytes;
    before = now;
    repeats.push_back(r);
  }
  Json out = {{"elapsed_s", repeats.empty() ? 0.0 : repeats[0]["elapsed_s"].get<double>()},
              {"columns", columns},
              {"answer", answer},
              {"repeats", repeats}};
  fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace sluice::bench
