#include "query/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/logging.h"
#include "query/loggers.h"
#include "query/server_state.h"

namespace sluice::query {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int32_t RandomInt32() {
  int32_t v = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v));
  return v;
}

Result<std::pair<std::string, int>> ParseHostPort(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return InvalidArgumentError("'{}' is not HOST:PORT", text);
  std::string host(text.substr(0, colon));
  std::string port_text(text.substr(colon + 1));
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535)
    return InvalidArgumentError("'{}': the port must be a number from 0 to 65535", text);
  if (host == "localhost") host = "127.0.0.1";
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) {
    return InvalidArgumentError("'{}': the host must be an IPv4 address", text);
  }
  return std::make_pair(host, port);
}

}  // namespace

const std::vector<std::string_view>& QueryConfigKeys() {
  static const std::vector<std::string_view> kKeys = {
      "query.pg_addr",
      "query.memory_limit",
      "query.threads",
      "query.allowed_directories",
      "query.max_connections",
      "query.max_message_bytes",
      "query.timeout_seconds",
      "query.users",
      "query.auth",
      "query.scram_iterations",
      "query.temp_directory",
      "query.max_running",
      "query.queue_timeout_seconds",
      "query.rss_limit",
      "query.tls",
      "query.require_tls",
  };
  return kKeys;
}

Result<QueryServerConfig> QueryServerConfigFrom(const Config& config) {
  QueryServerConfig out;
  QueryServerOptions& o = out.options;
  ASSIGN_OR_RETURN(std::string addr, config.GetString("query.pg_addr", "127.0.0.1:5433"));
  if (addr == "off") {
    out.enabled = false;
  } else {
    auto hp = ParseHostPort(addr);
    if (!hp.ok()) {
      return InvalidArgumentError("query.pg_addr (set in {}): {}", config.Origin("query.pg_addr"),
                                  hp.status().message());
    }
    o.host = hp->first;
    o.port = hp->second;
  }
  ASSIGN_OR_RETURN(o.memory_limit_bytes, config.GetBytes("query.memory_limit", int64_t{1} << 30));
  if (o.memory_limit_bytes < (int64_t{16} << 20)) {
    return InvalidArgumentError("query.memory_limit (set in {}) must be at least 16 MiB",
                                config.Origin("query.memory_limit"));
  }
  ASSIGN_OR_RETURN(int64_t threads, config.GetInt("query.threads", 2, 1, 256));
  o.threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(std::string data_dir, config.GetString("data_dir", "./sluice-data"));
  ASSIGN_OR_RETURN(o.temp_directory,
                   config.GetString("query.temp_directory", data_dir + "/query-tmp"));
  ASSIGN_OR_RETURN(o.allowed_directories, config.GetList("query.allowed_directories"));
  ASSIGN_OR_RETURN(std::string warehouse, config.GetString("warehouse", ""));
  // An S3 warehouse's files are read as local copies: its composition root allows their
  // directory (app/serve.cc).
  const bool remote = warehouse.find("://") != std::string::npos && !warehouse.starts_with("file:");
  if (!warehouse.empty() && !remote) {
    o.allowed_directories.insert(o.allowed_directories.begin(), warehouse);
  }
  ASSIGN_OR_RETURN(int64_t max_conn, config.GetInt("query.max_connections", 64, 1, 10000));
  o.max_connections = static_cast<int>(max_conn);
  ASSIGN_OR_RETURN(int64_t max_msg, config.GetBytes("query.max_message_bytes", int64_t{64} << 20));
  if (max_msg < 1024 || max_msg > (int64_t{1} << 30)) {
    return InvalidArgumentError("query.max_message_bytes (set in {}): {} is outside 1 KiB to 1 GiB",
                                config.Origin("query.max_message_bytes"), max_msg);
  }
  o.max_message_bytes = static_cast<size_t>(max_msg);
  ASSIGN_OR_RETURN(int64_t timeout, config.GetInt("query.timeout_seconds", 300, 0, 86400 * 365));
  o.timeout_ms = timeout * 1000;
  ASSIGN_OR_RETURN(int64_t max_running, config.GetInt("query.max_running", 4, 1, 1000));
  o.max_running = static_cast<int>(max_running);
  ASSIGN_OR_RETURN(int64_t queue_timeout,
                   config.GetInt("query.queue_timeout_seconds", 60, 0, 86400));
  o.queue_timeout_ms = queue_timeout * 1000;
  // Default: 80% of the memory the process may use: the machine's, or its cgroup's limit
  // when lower (a container).
  int64_t physical = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  if (std::FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
    long long cg = 0;
    if (std::fscanf(f, "%lld", &cg) == 1 && cg > 0 && cg < physical) physical = cg;
    std::fclose(f);
  }
  ASSIGN_OR_RETURN(o.rss_limit_bytes,
                   config.GetBytes("query.rss_limit", physical > 0 ? physical / 10 * 8 : 0));
  ASSIGN_OR_RETURN(std::vector<std::string> users, config.GetList("query.users"));
  for (const std::string& u : users) {
    size_t colon = u.find(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgumentError("query.users (set in {}): '{}' is not name:password",
                                  config.Origin("query.users"), u.substr(0, u.find(':')));
    }
    o.users.emplace_back(u.substr(0, colon), u.substr(colon + 1));
  }
  ASSIGN_OR_RETURN(std::string auth, config.GetString("query.auth", "scram-sha-256"));
  if (auth == "scram-sha-256") {
    o.auth = AuthMethod::kScramSha256;
  } else if (auth == "password") {
    o.auth = AuthMethod::kPassword;
  } else {
    return InvalidArgumentError("query.auth (set in {}): '{}' is not scram-sha-256 or password",
                                config.Origin("query.auth"), auth);
  }
  ASSIGN_OR_RETURN(int64_t iterations,
                   config.GetInt("query.scram_iterations", 4096, 4096, 10'000'000));
  o.scram_iterations = static_cast<int>(iterations);
  ASSIGN_OR_RETURN(out.tls, config.GetBool("query.tls", false));
  ASSIGN_OR_RETURN(o.require_tls, config.GetBool("query.require_tls", false));
  if (o.require_tls && !out.tls) {
    return InvalidArgumentError(
        "query.require_tls (set in {}) refuses sessions without TLS, but query.tls is off: set "
        "query.tls: true (and the tls: section)",
        config.Origin("query.require_tls"));
  }
  return out;
}

std::shared_ptr<SessionSlot> ServerState::Register(int fd) {
  std::lock_guard lock(mu_);
  if (static_cast<int>(sessions_.size()) >= options.max_connections) return nullptr;
  auto slot = std::make_shared<SessionSlot>();
  do {
    slot->process_id = RandomInt32() & 0x3fffffff;
  } while (slot->process_id == 0 || sessions_.contains(slot->process_id));
  slot->secret_key = RandomInt32();
  slot->fd = fd;
  sessions_[slot->process_id] = slot;
  return slot;
}

void ServerState::Unregister(const std::shared_ptr<SessionSlot>& slot) {
  std::lock_guard lock(mu_);
  sessions_.erase(slot->process_id);
  slot->connection = nullptr;
}

void ServerState::SetConnection(const std::shared_ptr<SessionSlot>& slot, duck::Connection* conn,
                                const std::string& user) {
  std::lock_guard lock(mu_);
  slot->connection = conn;
  slot->user = user;
}

void ServerState::Cancel(int32_t process_id, int32_t secret_key) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(process_id);
  if (it == sessions_.end() || it->second->secret_key != secret_key) {
    SLUICE_LOG(kLog, kDebug, "cancel request for an unknown session {}", process_id);
    return;
  }
  SessionSlot& s = *it->second;
  if (s.connection != nullptr && s.running_since_ms.load() != 0) {
    s.interrupt_reason.store(1);
    s.connection->Interrupt();
  } else if (s.in_query.load()) {
    s.cancel_pending.store(true);
    std::lock_guard admit(admit_mu_);  // a statement waiting for its turn gives up now
    admit_cv_.notify_all();
  }
}

int ServerState::SessionCount() {
  std::lock_guard lock(mu_);
  return static_cast<int>(sessions_.size());
}

void ServerState::ReapWorkers(bool all) {
  std::list<Worker> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (all || it->done->load()) {
        finished.splice(finished.end(), workers_, it++);
      } else {
        ++it;
      }
    }
  }
  for (Worker& w : finished) {
    w.thread.join();
    ::close(w.fd);  // closed only now: until the join, StopAll may shut it down
  }
}

void ServerState::AcceptLoop() {
  while (!stopping.load()) {
    pollfd p{listen_fd, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    ReapWorkers(false);
    if (r <= 0) continue;
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        SLUICE_LOG(kLog, kWarn, "accept: {}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard lock(mu_);
    // Threads for sessions and cancel requests alike; a flood beyond the session limit
    // (plus room for cancel requests) is closed at once.
    if (static_cast<int>(workers_.size()) >= options.max_connections + 32) {
      ::close(fd);
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([this, fd, done] {
                                Session(*this, fd).Run();
                                done->store(true);
                              }),
                              done, fd});
  }
}

Result<int> ServerState::ConnectLocal(const std::string& user) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return IOError("socketpair: {}", std::strerror(errno));
  }
  std::lock_guard lock(mu_);
  if (stopping.load() || static_cast<int>(workers_.size()) >= options.max_connections + 32) {
    ::close(fds[0]);
    ::close(fds[1]);
    return ResourceExhaustedError("the query server {}",
                                  stopping.load() ? "is stopping" : "has too many sessions");
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  const int server_fd = fds[0];
  workers_.push_back(Worker{std::thread([this, server_fd, user, done] {
                              Session(*this, server_fd, user).Run();
                              done->store(true);
                            }),
                            done, server_fd});
  return fds[1];
}

bool ServerState::Admit(const std::string& user, int user_limit,
                        const std::atomic<bool>* cancelled) {
  std::unique_lock lock(admit_mu_);
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.queue_timeout_ms);
  auto full = [&] {
    if (running_ >= options.max_running) return true;
    if (user_limit <= 0) return false;
    auto it = running_by_user_.find(user);
    return it != running_by_user_.end() && it->second >= user_limit;
  };
  while (full()) {
    if (cancelled != nullptr && cancelled->load()) return false;
    if (stopping.load() || admit_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      if (!full() && !stopping.load()) break;
      return false;
    }
  }
  ++running_;
  ++running_by_user_[user];
  turns.fetch_add(1);
  return true;
}

void ServerState::Release(const std::string& user) {
  std::lock_guard lock(admit_mu_);
  --running_;
  auto it = running_by_user_.find(user);
  if (it != running_by_user_.end() && --it->second <= 0) running_by_user_.erase(it);
  // Waiters wait for different things (a turn, or their user's): each looks again.
  admit_cv_.notify_all();
}

namespace {
int64_t ProcessRssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * ::sysconf(_SC_PAGESIZE) : 0;
}
}  // namespace

std::optional<std::pair<size_t, bool>> PickMemoryVictim(
    const std::vector<RunningStatement>& statements) {
  // DuckDB tells memory per database, not per query: a user's part of it is taken as its
  // part of the statements running (docs/design/0020, decision 11).
  std::map<std::string, int> by_user;
  for (const RunningStatement& s : statements) ++by_user[s.user];
  const int total = static_cast<int>(statements.size());
  std::optional<std::pair<size_t, bool>> best;
  for (size_t i = 0; i < statements.size(); ++i) {
    const RunningStatement& s = statements[i];
    if (s.interrupted) continue;
    const bool over = s.share_percent > 0 && by_user.size() > 1 &&
                      by_user[s.user] * 100 > s.share_percent * total;
    if (!best || (over && !best->second) ||
        (over == best->second && s.since_ms < statements[best->first].since_ms)) {
      best = {i, over};
    }
  }
  return best;
}

void ServerState::WatchdogLoop() {
  std::unique_lock lock(mu_);
  int64_t last_rss_interrupt = 0;
  int64_t rss_at_last_interrupt = 0;  // 0: RSS was below the limit since
  while (!stopping.load()) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(100));
    int64_t now = NowMs();
    if (options.rss_limit_bytes > 0 && now - last_rss_interrupt >= 1000) {
      int64_t rss = rss_source ? rss_source() : ProcessRssBytes();
      if (rss <= options.rss_limit_bytes) rss_at_last_interrupt = 0;
      // After an interrupt the allocator may keep the freed pages: the next one needs RSS
      // to have grown by 64 MiB since, so one big query does not take innocent ones along.
      const bool grew =
          rss_at_last_interrupt == 0 || rss > rss_at_last_interrupt + (int64_t{64} << 20);
      if (rss > options.rss_limit_bytes && grew) {
        // The statement to interrupt (PickMemoryVictim): of those running and not yet
        // interrupted, with each user's memory_share.
        std::vector<SessionSlot*> slots;
        std::vector<RunningStatement> statements;
        std::map<std::string, int> shares;
        for (auto& [pid, s] : sessions_) {
          int64_t since = s->running_since_ms.load();
          if (since == 0 || s->connection == nullptr) continue;
          auto share = shares.find(s->user);
          if (share == shares.end()) {
            share = shares
                        .emplace(s->user,
                                 hooks_memory_share() ? options.hooks.memory_share_of(s->user) : 0)
                        .first;
          }
          slots.push_back(s.get());
          statements.push_back({s->user, since, share->second, s->interrupt_reason.load() != 0});
        }
        std::optional<std::pair<size_t, bool>> victim = PickMemoryVictim(statements);
        SessionSlot* oldest = victim ? slots[victim->first] : nullptr;
        const bool oldest_over = victim && victim->second;
        if (oldest != nullptr) {
          oldest->rss_at_interrupt.store(rss);
          oldest->interrupt_reason.store(oldest_over ? 4 : 3);
          oldest->connection->Interrupt();
          last_rss_interrupt = now;
          rss_at_last_interrupt = rss;
          SLUICE_LOG(
              kLog, kWarn,
              "RSS {} MiB above query.rss_limit {} MiB: interrupted the longest-running "
              "query{}",
              rss >> 20, options.rss_limit_bytes >> 20,
              oldest_over ? fmt::format(" of {}, above its memory_share", oldest->user) : "");
        }
      }
    }
    if (options.timeout_ms <= 0) continue;
    for (auto& [pid, s] : sessions_) {
      int64_t since = s->running_since_ms.load();
      if (since != 0 && now - since > options.timeout_ms && s->connection != nullptr &&
          s->interrupt_reason.load() == 0) {
        s->interrupt_reason.store(2);
        s->connection->Interrupt();
      }
    }
  }
}

void ServerState::StopAll() {
  {
    std::lock_guard lock(mu_);
    stopping.store(true);
    stop_cv_.notify_all();
  }
  {
    std::lock_guard lock(admit_mu_);  // sessions waiting for a turn give up now
    admit_cv_.notify_all();
  }
  if (acceptor.joinable()) acceptor.join();
  if (watchdog.joinable()) watchdog.join();
  {
    std::lock_guard lock(mu_);
    for (Worker& w : workers_) ::shutdown(w.fd, SHUT_RDWR);
    for (auto& [pid, s] : sessions_) {
      if (s->connection != nullptr) s->connection->Interrupt();
    }
  }
  ReapWorkers(true);
  if (listen_fd >= 0) {
    ::close(listen_fd);
    listen_fd = -1;
  }
}

Result<std::unique_ptr<QueryServer>> QueryServer::Start(QueryServerOptions options) {
  auto state = std::make_unique<ServerState>();
  state->options = std::move(options);
  QueryServerOptions& o = state->options;

  ASSIGN_OR_RETURN(state->db, duck::Database::Open({.memory_limit_bytes = o.memory_limit_bytes,
                                                    .threads = o.threads,
                                                    .temp_directory = o.temp_directory,
                                                    .survive_internal_errors = true}));
  {
    // The sandbox: set before any client connects, then locked.
    ASSIGN_OR_RETURN(auto setup, duck::Connection::Open(*state->db));
    std::string dirs;
    for (const std::string& d : o.allowed_directories) {
      if (!dirs.empty()) dirs += ", ";
      dirs += duck::QuoteLiteral(d);
    }
    RETURN_IF_ERROR(setup->Execute(fmt::format("SET allowed_directories = [{}]", dirs)));
    RETURN_IF_ERROR(setup->Execute("SET enable_external_access = false"));
    RETURN_IF_ERROR(setup->Execute("SET autoinstall_known_extensions = false"));
    RETURN_IF_ERROR(setup->Execute("SET autoload_known_extensions = false"));
    RETURN_IF_ERROR(setup->Execute("SET allow_community_extensions = false"));
    (void)setup->Execute("SET TimeZone = 'UTC'");  // with ICU loaded; sessions report UTC
    if (o.on_database_open) RETURN_IF_ERROR(o.on_database_open(*setup));
    RETURN_IF_ERROR(setup->Execute("SET lock_configuration = true"));
  }
  if (state->options.user_store == nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<auth::UserStore> own, auth::UserStore::Load("", nullptr));
    for (const auto& [name, password] : o.users) {
      RETURN_IF_ERROR(own->Seed(name, password, o.scram_iterations).status());
    }
    state->options.user_store = std::move(own);
  }

  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket", "query server", errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    return IOError("query server: cannot listen on {}:{}: {}", o.host, o.port, std::strerror(err));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  state->listen_fd = fd;
  state->port = ntohs(addr.sin_port);
  ServerState* s = state.get();
  state->acceptor = std::thread([s] { s->AcceptLoop(); });
  state->watchdog = std::thread([s] { s->WatchdogLoop(); });
  SLUICE_LOG(kLog, kInfo, "Postgres wire protocol on {}:{} (memory_limit {} MiB, {} threads, {})",
             o.host, state->port, o.memory_limit_bytes >> 20, o.threads,
             o.user_store->empty()
                 ? "trust"
                 : (o.auth == AuthMethod::kScramSha256 ? "scram-sha-256" : "password"));
  return std::unique_ptr<QueryServer>(new QueryServer(std::move(state)));
}

QueryServer::QueryServer(std::unique_ptr<ServerState> state) : state_(std::move(state)) {}

QueryServer::~QueryServer() { Stop(); }

void QueryServer::Stop() {
  if (state_ && state_->listen_fd >= 0) state_->StopAll();
}

const std::string& QueryServer::host() const { return state_->options.host; }
int QueryServer::port() const { return state_->port; }
Result<int> QueryServer::ConnectLocal(const std::string& user) {
  return state_->ConnectLocal(user);
}
void QueryServer::Cancel(int32_t process_id, int32_t secret_key) {
  state_->Cancel(process_id, secret_key);
}
int QueryServer::session_count() const { return state_->SessionCount(); }
QueryServer::Stats QueryServer::stats() const {
  return {.turns = state_->turns.load(),
          .simple_statements_with_steps = state_->simple_steps.load(),
          .extended_statements_with_steps = state_->extended_steps.load()};
}

int64_t SessionNowMs() { return NowMs(); }

}  // namespace sluice::query
