#include "sinks/testing/postgres_server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace sluice::sinks::testing {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUser = "postgres";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv (as the postgres user when we are root) with stdout and stderr to `log`;
// returns the exit status (-1 when it could not run).
int Run(std::vector<std::string> argv, const fs::path& log) {
  if (::geteuid() == 0) {
    argv.insert(argv.begin(), {"runuser", "-u", kUser, "--"});
  }
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "a");
    if (out != nullptr) {
      ::dup2(fileno(out), 1);
      ::dup2(fileno(out), 2);
    }
    // Not the test's directory: the postgres user may not be able to enter it.
    if (::chdir("/") != 0) ::_exit(126);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

}  // namespace

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string PostgresServer::BinDir() {
  if (const char* env = std::getenv("SLUICE_PG_BINDIR"); env != nullptr && *env != '\0') {
    return fs::exists(fs::path(env) / "initdb") ? env : "";
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    fs::path bin = e.path() / "bin";
    if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl") && fs::exists(bin / "postgres")) {
      found.push_back(bin.string());
    }
  }
  // The newest major version ("15" < "16"; Debian installs two-digit majors).
  std::sort(found.begin(), found.end());
  return found.empty() ? "" : found.back();
}

std::string PostgresServer::Unavailable() {
  if (BinDir().empty()) {
    return "PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not installed: no "
           "/usr/lib/postgresql/*/bin (Debian's postgresql package; scripts/setup.sh "
           "installs it) and no $SLUICE_PG_BINDIR";
  }
  return "";
}

PostgresServer::~PostgresServer() {
  if (running_) {
    const std::string bin = BinDir();
    Run({bin + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"},
        fs::path(dir_) / "pg_ctl.log");
  }
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

std::string PostgresServer::dsn(const std::string& dbname) const {
  return fmt::format("host=127.0.0.1 port={} user=postgres dbname={} connect_timeout=10", port_,
                     dbname);
}

std::string PostgresServer::Start() {
  const std::string bin = BinDir();
  if (bin.empty()) return Unavailable();
  if (running_) return "";
  if (dir_.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "sluice-pg-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
    dir_ = tmpl;
    if (::geteuid() == 0) {
      struct passwd* pw = ::getpwnam(kUser);
      if (pw == nullptr) return "running as root and there is no postgres user to run initdb";
      if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) return "chown of " + dir_ + " failed";
    }
    // mkdtemp makes it 0700: the postgres user owns it (as root) or we do.
    port_ = FreePort();
    if (port_ == 0) return "no free port on 127.0.0.1";
    const fs::path log = fs::path(dir_) / "initdb.log";
    int rc = Run({bin + "/initdb", "-D", dir_ + "/data", "-U", kUser, "--auth=trust",
                  "--encoding=UTF8", "--locale=C", "--no-sync"},
                 log);
    if (rc != 0) return fmt::format("initdb exited with {}: {}", rc, Tail(ReadFile(log)));
    // Appended as whoever we are: the file keeps its owner.
    std::ofstream conf(fs::path(dir_) / "data" / "postgresql.conf", std::ios::app);
    conf << "\n# sluice tests\nlisten_addresses = '127.0.0.1'\nport = " << port_
         << "\nunix_socket_directories = '" << dir_ << "'\nmax_connections = 20\n"
         << "shared_buffers = 16MB\nlog_min_messages = warning\n"
         << extra_conf_ << "\n";
    if (!conf) return "cannot append to postgresql.conf";
  }
  const fs::path log = fs::path(dir_) / "server.log";
  int rc =
      Run({bin + "/pg_ctl", "-D", dir_ + "/data", "-l", log.string(), "-w", "-t", "60", "start"},
          fs::path(dir_) / "pg_ctl.log");
  if (rc != 0) {
    return fmt::format("pg_ctl start exited with {}: {}\n{}", rc,
                       Tail(ReadFile(fs::path(dir_) / "pg_ctl.log")), Tail(ReadFile(log)));
  }
  running_ = true;
  return "";
}

std::string PostgresServer::Stop() {
  if (!running_) return "";
  const std::string bin = BinDir();
  int rc = Run({bin + "/pg_ctl", "-D", dir_ + "/data", "-m", "fast", "-w", "-t", "60", "stop"},
               fs::path(dir_) / "pg_ctl.log");
  if (rc != 0) {
    return fmt::format("pg_ctl stop exited with {}: {}", rc,
                       Tail(ReadFile(fs::path(dir_) / "pg_ctl.log")));
  }
  running_ = false;
  return "";
}

std::string PostgresServer::Psql(const std::string& sql, const std::string& dbname) const {
  const std::string bin = BinDir();
  const fs::path out = fs::path(dir_) / fmt::format("psql-{}.out", ::getpid());
  std::error_code ec;
  fs::remove(out, ec);
  int rc = Run({bin + "/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                std::to_string(port_), "-U", kUser, "-d", dbname, "-c", sql},
               out);
  std::string text = ReadFile(out);
  fs::remove(out, ec);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (rc != 0) return "ERROR: " + text;
  return text;
}

}  // namespace sluice::sinks::testing
