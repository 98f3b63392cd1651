#include "lake/rest_catalog.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "base/utf8.h"
#include "lake/iceberg_json.h"
#include "lake/iceberg_schema.h"
#include "lake/storage.h"
#include "lake/table_files.h"
#include "lake/table_metadata.h"
#include "lake/table_update.h"

namespace sluice::lake {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNamespaceFile = ".namespace.json";

// An error as the REST spec's ErrorModel. `type` names the exception a Java client
// raises for it (NoSuchTableException, CommitFailedException, ...).
HttpResponse Error(int code, std::string_view type, std::string_view message) {
  Json body = {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
  return {.status = code, .body = body.dump()};
}

HttpResponse Ok(const Json& body) { return {.status = 200, .body = body.dump()}; }
HttpResponse NoContent() { return {.status = 204, .body = ""}; }

// The HTTP answer to a Status from the metadata layer (docs/design/0008 "Error kinds").
HttpResponse FromStatus(const Status& st) {
  switch (st.code()) {
    case StatusCode::kFailedPrecondition:
      return Error(409, "CommitFailedException", st.message());
    case StatusCode::kAlreadyExists:
      return Error(409, "AlreadyExistsException", st.message());
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented:
      return Error(400, "BadRequestException", st.message());
    case StatusCode::kNotFound:
      return Error(404, "NotFoundException", st.message());
    default:
      return Error(500, "ServiceFailureException", st.ToString());
  }
}

std::string Dotted(const std::vector<std::string>& parts) {
  return fmt::format("{}", fmt::join(parts, "."));
}

// A namespace level or table name is one directory: valid UTF-8 (names go into JSON), no
// '/', no control characters (the 0x1F separator among them), not empty, not "." or "..",
// and not starting with '.' (the catalog's own files are dot-named).
Status CheckName(std::string_view name, std::string_view what) {
  if (name.empty()) return InvalidArgumentError("{} must not be empty", what);
  if (!IsValidUtf8(name))
    return InvalidArgumentError("{} is not valid UTF-8", what);  // before it is quoted
  if (name.size() > 255)
    return InvalidArgumentError("{} \"{}\" is longer than 255 bytes", what, name);
  if (name[0] == '.') return InvalidArgumentError("{} \"{}\" must not start with '.'", what, name);
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgumentError("{} \"{}\" must not contain '/' or control characters", what,
                                  name);
    }
  }
  return Status::OK();
}

Status CheckNamespace(const std::vector<std::string>& ns) {
  if (ns.empty()) return InvalidArgumentError("the namespace must have at least one level");
  for (const std::string& part : ns) RETURN_IF_ERROR(CheckName(part, "namespace level"));
  return Status::OK();
}

}  // namespace

namespace {
// The order a table's version files are retired in: version-hint.text (-1), then
// v<N>.metadata.json (N); nullopt for any other file.
std::optional<int64_t> VersionRank(const std::string& name) {
  if (name == "version-hint.text") return -1;
  if (name.size() > 15 && name[0] == 'v' && name.ends_with(".metadata.json") &&
      std::all_of(name.begin() + 1, name.end() - 14, [](char c) { return c >= '0' && c <= '9'; })) {
    return std::strtoll(name.c_str() + 1, nullptr, 10);
  }
  return std::nullopt;
}
}  // namespace

// The warehouse as the catalog sees it: directories of the local file system, or the
// prefixes of an S3 bucket (docs/design/0024, decision 21), where nothing is renamed.
class WarehouseFs {
 public:
  virtual ~WarehouseFs() = default;
  virtual bool IsDir(const std::string& path) const = 0;
  virtual bool IsFile(const std::string& path) const = 0;
  // The names of the directories right under `dir` that are not dot-named, sorted.
  virtual std::vector<std::string> Subdirs(const std::string& dir) const = 0;
  // NotFound when it is not there.
  virtual Result<std::string> Read(const std::string& path) const = 0;
  // Whole or not at all.
  virtual Status Write(const std::string& path, std::string_view bytes) const = 0;
  virtual Status MakeDirs(const std::string& dir) const = 0;
  // OK when it is not there.
  virtual Status Remove(const std::string& path) const = 0;
  virtual void RemoveTree(const std::string& dir) const = 0;
  // Moves a table's version files (v<N>.metadata.json, version-hint.text) from its
  // `metadata` directory to `to`, the hint first and then the versions from the oldest, so
  // that a reader finds the current version until the last one goes; the table is gone
  // then. Manifests and lists stay where the snapshots name them (a renamed table, or one
  // registered again from `to`, still reads them). A commit racing this may land a
  // version after it: then the table is there again, at that version (decision 21).
  virtual Status RetireVersions(const std::string& metadata, const std::string& to) const = 0;
  virtual void RemoveIfEmpty(const std::string& dir) const = 0;
};

namespace {

class LocalFs final : public WarehouseFs {
 public:
  bool IsDir(const std::string& path) const override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  bool IsFile(const std::string& path) const override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }
  std::vector<std::string> Subdirs(const std::string& dir) const override {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      std::error_code ec2;
      if (it->is_directory(ec2)) out.push_back(std::move(name));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  Result<std::string> Read(const std::string& path) const override { return ReadWholeFile(path); }
  Status Write(const std::string& path, std::string_view bytes) const override {
    return WriteFileAtomically(path, bytes);
  }
  Status MakeDirs(const std::string& dir) const override {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return IOError("cannot create {}: {}", dir, ec.message());
    return Status::OK();
  }
  Status Remove(const std::string& path) const override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError("unlink", path, errno);
    return Status::OK();
  }
  void RemoveTree(const std::string& dir) const override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  Status RetireVersions(const std::string& metadata, const std::string& to) const override {
    std::vector<std::pair<int64_t, std::string>> versions;
    std::error_code ec;
    for (fs::directory_iterator it(metadata, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (std::optional<int64_t> rank = VersionRank(name)) versions.emplace_back(*rank, name);
    }
    if (ec) return IOError("cannot list {}: {}", metadata, ec.message());
    std::sort(versions.begin(), versions.end());
    RETURN_IF_ERROR(MakeDirs(to));
    for (const auto& [rank, name] : versions) {
      std::string from = metadata + "/" + name;
      if (::rename(from.c_str(), (to + "/" + name).c_str()) != 0)
        return ErrnoError("rename", from, errno);
    }
    return Status::OK();
  }
  void RemoveIfEmpty(const std::string& dir) const override { (void)::rmdir(dir.c_str()); }
};

class S3Fs final : public WarehouseFs {
 public:
  // A "directory" is a prefix some object lies under: one of its parent's common prefixes.
  bool IsDir(const std::string& path) const override {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos || path.size() <= 5 || slash < 5) return false;
    Result<std::vector<std::string>> children = ListS3Children(path.substr(0, slash));
    return children.ok() &&
           std::find(children->begin(), children->end(), path.substr(slash + 1)) != children->end();
  }
  bool IsFile(const std::string& path) const override {
    Result<const Storage*> storage = StorageFor(path);
    if (!storage.ok()) return false;
    Result<std::optional<uint64_t>> size = (*storage)->Size(path);
    return size.ok() && size->has_value();
  }
  std::vector<std::string> Subdirs(const std::string& dir) const override {
    Result<std::vector<std::string>> children = ListS3Children(dir);
    std::vector<std::string> out;
    if (!children.ok()) return out;
    for (std::string& c : *children) {
      if (!c.empty() && c[0] != '.') out.push_back(std::move(c));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  Result<std::string> Read(const std::string& path) const override { return ReadLocation(path); }
  Status Write(const std::string& path, std::string_view bytes) const override {
    return WriteLocation(path, bytes);
  }
  Status MakeDirs(const std::string&) const override { return Status::OK(); }
  Status Remove(const std::string& path) const override { return DeleteLocation(path); }
  void RemoveTree(const std::string& dir) const override {
    Result<const Storage*> storage = StorageFor(dir);
    if (!storage.ok()) return;
    Result<std::vector<StoredObject>> objects = (*storage)->List(dir);
    if (!objects.ok()) return;
    for (const StoredObject& o : *objects) (void)(*storage)->Delete(o.location);
  }
  // No rename on S3: the version objects are copied, then the originals deleted in order.
  Status RetireVersions(const std::string& metadata, const std::string& to) const override {
    ASSIGN_OR_RETURN(const Storage* storage, StorageFor(metadata));
    ASSIGN_OR_RETURN(std::vector<StoredObject> objects, storage->List(metadata));
    std::vector<std::pair<int64_t, std::string>> versions;
    for (const StoredObject& o : objects) {
      std::string name = o.location.substr(o.location.rfind('/') + 1);
      if (o.location != metadata + "/" + name) continue;  // not right under metadata/
      if (std::optional<int64_t> rank = VersionRank(name)) versions.emplace_back(*rank, name);
    }
    std::sort(versions.begin(), versions.end());
    for (const auto& [rank, name] : versions) {
      ASSIGN_OR_RETURN(std::string bytes, storage->Read(metadata + "/" + name));
      RETURN_IF_ERROR(storage->Write(to + "/" + name, bytes));
    }
    for (const auto& [rank, name] : versions)
      RETURN_IF_ERROR(storage->Delete(metadata + "/" + name));
    return Status::OK();
  }
  void RemoveIfEmpty(const std::string&) const override {}
};

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Json NamespaceJson(const std::vector<std::string>& ns) {
  Json out = Json::array();
  for (const std::string& p : ns) out.push_back(p);
  return out;
}

Json IdentifierJson(const std::vector<std::string>& ns, const std::string& name) {
  return {{"namespace", NamespaceJson(ns)}, {"name", name}};
}

Result<std::vector<std::string>> NamespaceFromJson(const Json& j, std::string_view path) {
  if (!j.is_array())
    return InvalidArgumentError("{}: expected an array of strings, got {}", path, JsonKindName(j));
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    ASSIGN_OR_RETURN(std::string part, JsonToString(j[i], JsonPath(path, i)));
    out.push_back(std::move(part));
  }
  return out;
}

struct TableIdentifier {
  std::vector<std::string> ns;
  std::string name;
};

Result<TableIdentifier> TableIdentifierFromJson(const Json& j, std::string_view path) {
  ASSIGN_OR_RETURN(JsonObject o, JsonObject::Of(j, std::string(path)));
  TableIdentifier id;
  ASSIGN_OR_RETURN(const Json* ns, o.Require("namespace"));
  ASSIGN_OR_RETURN(id.ns, NamespaceFromJson(*ns, o.PathOf("namespace")));
  ASSIGN_OR_RETURN(id.name, o.String("name"));
  RETURN_IF_ERROR(CheckNamespace(id.ns));
  RETURN_IF_ERROR(CheckName(id.name, "table name"));
  return id;
}

Result<std::vector<std::string>> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view seg = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    out.emplace_back(seg);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

// The catalog's work for one request; the paths are resolved, the names checked.
class Session {
 public:
  Session(const std::string& warehouse, const WarehouseFs& fs, const RestCatalog::Options& options,
          std::mutex& mu)
      : warehouse_(warehouse), fs_(fs), options_(options), mu_(mu) {}

  HttpResponse Route(const HttpRequest& req);

 private:
  // A table: a directory whose metadata/ holds a committed version.
  Result<std::optional<MetadataVersion>> CurrentOf(const std::string& dir) const {
    if (!fs_.IsDir(dir + "/metadata")) return std::optional<MetadataVersion>();
    return TableFiles(dir).Current();
  }
  bool IsTableDir(const std::string& dir) const {
    Result<std::optional<MetadataVersion>> c = CurrentOf(dir);
    return !c.ok() || c->has_value();  // an unreadable table is still a table
  }
  // A namespace: a directory that is not a table and holds .namespace.json or, below it, a
  // table or a namespace (the iceberg sink makes the directories of its table's namespace
  // without .namespace.json). What a dropped table leaves (data/, metadata.renamed-*) is
  // neither.
  bool IsNamespaceDir(const std::string& dir, int depth = 0) const {
    if (!fs_.IsDir(dir) || IsTableDir(dir)) return false;
    if (fs_.IsFile(dir + "/" + std::string(kNamespaceFile))) return true;
    if (depth > 64) return false;
    for (const std::string& child : fs_.Subdirs(dir)) {
      std::string path = dir + "/" + child;
      if (IsTableDir(path) || IsNamespaceDir(path, depth + 1)) return true;
    }
    return false;
  }
  bool remote() const { return IsS3Location(warehouse_); }
  int64_t Now() const { return options_.now_ms ? options_.now_ms() : SystemNowMs(); }
  std::string NamespaceDir(const std::vector<std::string>& ns) const {
    std::string out = warehouse_;
    for (const std::string& p : ns) out += "/" + p;
    return out;
  }
  std::string TableDir(const TableIdentifier& id) const {
    return NamespaceDir(id.ns) + "/" + id.name;
  }
  std::string DefaultLocation(const TableIdentifier& id) const { return FileUri(TableDir(id)); }
  // Table locations and registered metadata stay inside the warehouse: the catalog, its
  // expiry and the query server (whose sandbox is the warehouse) never reach other files.
  Status CheckInsideWarehouse(std::string_view what, const std::string& location) const {
    if (remote()) {
      if (!IsS3Location(location) || !NormalLocation(location).starts_with(warehouse_ + "/") ||
          location.find("/../") != std::string::npos || location.ends_with("/..")) {
        return InvalidArgumentError("{} {} is outside the warehouse {}", what, location,
                                    warehouse_);
      }
      return Status::OK();
    }
    if (location.find('%') != std::string::npos) {
      // Other clients decode percent escapes in file: URIs, LocalPath does not: refused,
      // so that all read the same path.
      return InvalidArgumentError("{} {}: percent escapes are not accepted", what, location);
    }
    Result<std::string> path = LocalPath(location);
    if (!path.ok())
      return InvalidArgumentError("{} {}: {}", what, location, path.status().message());
    // Symbolic links resolved as far as the path exists (the warehouse is canonical).
    std::error_code ec;
    std::string normal = fs::weakly_canonical(fs::path(*path), ec).string();
    if (ec) normal = fs::path(*path).lexically_normal().string();
    while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
    if (!normal.starts_with(warehouse_ + "/")) {
      return InvalidArgumentError("{} {} is outside the warehouse {}", what, location, warehouse_);
    }
    return Status::OK();
  }

  HttpResponse NoSuchNamespace(const std::vector<std::string>& ns) const {
    return Error(404, "NoSuchNamespaceException",
                 fmt::format("namespace {} does not exist", Dotted(ns)));
  }
  HttpResponse NoSuchTable(const TableIdentifier& id) const {
    return Error(404, "NoSuchTableException",
                 fmt::format("table {}.{} does not exist", Dotted(id.ns), id.name));
  }

  HttpResponse Config(const HttpRequest& req);
  HttpResponse ListNamespaces(const HttpRequest& req);
  HttpResponse CreateNamespace(const HttpRequest& req);
  HttpResponse LoadNamespace(const std::vector<std::string>& ns, bool head);
  HttpResponse DropNamespace(const std::vector<std::string>& ns);
  HttpResponse UpdateNamespaceProperties(const std::vector<std::string>& ns,
                                         const HttpRequest& req);
  HttpResponse ListTables(const std::vector<std::string>& ns, const HttpRequest& req);
  HttpResponse CreateTable(const std::vector<std::string>& ns, const HttpRequest& req);
  HttpResponse RegisterTable(const std::vector<std::string>& ns, const HttpRequest& req);
  HttpResponse LoadTable(const TableIdentifier& id, const HttpRequest& req);
  HttpResponse TableExists(const TableIdentifier& id);
  HttpResponse CommitTable(const TableIdentifier& id, const HttpRequest& req);
  HttpResponse DropTable(const TableIdentifier& id, const HttpRequest& req);
  HttpResponse RenameTable(const HttpRequest& req);

  // The identifier-free checks shared by create, register and rename's destination: the
  // namespace exists, and neither a table nor a namespace has the name.
  std::optional<HttpResponse> CheckFreeName(const TableIdentifier& id) const;
  Result<std::map<std::string, std::string>> ReadProperties(
      const std::vector<std::string>& ns) const;
  Status WriteProperties(const std::vector<std::string>& ns,
                         const std::map<std::string, std::string>& props) const;
  // `result` with the configured S3 credentials in its config, when the catalog vends them
  // (opt-in), the client asks (X-Iceberg-Access-Delegation: vended-credentials) and the
  // table is on S3.
  Json Vend(const HttpRequest& req, Json result) const {
    if (!options_.vended_credentials) return result;
    const std::string* asked = req.Header("x-iceberg-access-delegation");
    if (asked == nullptr || asked->find("vended-credentials") == std::string::npos) return result;
    const Json& metadata = result["metadata"];
    if (!metadata.contains("location") || !metadata["location"].is_string() ||
        !IsS3Location(metadata["location"].get<std::string>())) {
      return result;
    }
    for (const auto& [k, v] : options_.vended_credentials()) result["config"][k] = v;
    return result;
  }
  // LoadTableResult / CommitTableResponse.
  static Json TableResult(const std::string& metadata_path, Json metadata, bool with_config);
  // Pagination over sorted names: pageToken is the last name of the previous page.
  static std::pair<std::vector<std::string>, std::optional<std::string>> Page(
      std::vector<std::string> names, const HttpRequest& req, Status* st);

  // The access to ask for `req`, or null when its principal may do everything.
  const CatalogAccess* Limited(const HttpRequest& req) const {
    const CatalogAccess* a = options_.access.get();
    return a == nullptr || a->Everything(req.principal) ? nullptr : a;
  }
  // Why `req` may not do what Route checked (401 without a principal, else 403).
  static HttpResponse Refused(const HttpRequest& req, const std::string& what) {
    if (req.principal.empty()) {
      return Error(401, "NotAuthorizedException",
                   fmt::format("{}: authorization is on, and the request has no login", what));
    }
    return Error(403, "ForbiddenException",
                 fmt::format("{}: not allowed for {}", what, req.principal));
  }
  // The checks of Route, before the handler runs: nullopt when allowed.
  std::optional<HttpResponse> Check(const HttpRequest& req, const std::vector<std::string>& s,
                                    const std::vector<std::string>* ns,
                                    const std::string* table) const;

  const std::string& warehouse_;
  const WarehouseFs& fs_;
  const RestCatalog::Options& options_;
  std::mutex& mu_;
};

std::optional<HttpResponse> Session::Check(const HttpRequest& req,
                                           const std::vector<std::string>& s,
                                           const std::vector<std::string>* ns,
                                           const std::string* table) const {
  const CatalogAccess* a = Limited(req);
  if (a == nullptr) return std::nullopt;
  const std::string& m = req.method;
  const std::string& p = req.principal;
  auto parent = [](std::vector<std::string> n) {
    if (!n.empty()) n.pop_back();
    return n;
  };
  if (ns == nullptr) {
    // /v1/namespaces: listing is filtered; a new namespace needs CREATE on its parent.
    if (m != "POST") return std::nullopt;
    Result<Json> body = ParseJson(req.body, "CreateNamespaceRequest");
    if (!body.ok() || !body->is_object() || !body->contains("namespace")) return std::nullopt;
    Result<std::vector<std::string>> n = NamespaceFromJson((*body)["namespace"], "$.namespace");
    if (!n.ok()) return std::nullopt;  // the handler reports it
    if (a->CreateIn(p, parent(*n))) return std::nullopt;
    return Refused(req, fmt::format("creating namespace {}", Dotted(*n)));
  }
  const std::string name = Dotted(*ns);
  if (table == nullptr) {
    if (s.size() == 2 && (m == "GET" || m == "HEAD")) {
      if (a->SeeNamespace(p, *ns)) return std::nullopt;
      return Refused(req, fmt::format("namespace {}", name));
    }
    if (s.size() == 2 && m == "DELETE") {
      if (a->CreateIn(p, parent(*ns))) return std::nullopt;
      return Refused(req, fmt::format("dropping namespace {}", name));
    }
    if (s.size() == 3 && s[2] == "tables" && m == "GET") {
      if (a->SeeNamespace(p, *ns)) return std::nullopt;  // the list is filtered
      return Refused(req, fmt::format("namespace {}", name));
    }
    // properties, register, a new table.
    if (a->CreateIn(p, *ns)) return std::nullopt;
    return Refused(req, fmt::format("changing namespace {}", name));
  }
  const std::string full = name + "." + *table;
  if (m == "GET" || m == "HEAD" || s.size() == 5) {
    if (a->ReadTable(p, *ns, *table)) return std::nullopt;
    return Refused(req, fmt::format("table {}", full));
  }
  if (m == "POST") {
    if (a->WriteTable(p, *ns, *table)) return std::nullopt;
    return Refused(req, fmt::format("committing to table {}", full));
  }
  if (a->CreateIn(p, *ns)) return std::nullopt;  // DELETE
  return Refused(req, fmt::format("dropping table {}", full));
}

Json Session::TableResult(const std::string& metadata_path, Json metadata, bool with_config) {
  Json out = Json::object();
  out["metadata-location"] = FileUri(metadata_path);
  out["metadata"] = std::move(metadata);
  if (with_config) out["config"] = Json::object();
  return out;
}

std::pair<std::vector<std::string>, std::optional<std::string>> Session::Page(
    std::vector<std::string> names, const HttpRequest& req, Status* st) {
  if (auto it = req.query.find("pageToken"); it != req.query.end() && !it->second.empty()) {
    const std::string& token = it->second;
    names.erase(names.begin(), std::upper_bound(names.begin(), names.end(), token));
  }
  std::optional<std::string> next;
  if (auto it = req.query.find("pageSize"); it != req.query.end() && !it->second.empty()) {
    size_t size = 0;
    try {
      long long v = std::stoll(it->second);
      if (v < 1) throw std::out_of_range("pageSize");
      size = static_cast<size_t>(v);
    } catch (const std::exception&) {
      *st = InvalidArgumentError("pageSize \"{}\" is not a positive integer", it->second);
      return {};
    }
    if (names.size() > size) {
      names.resize(size);
      next = names.back();
    }
  }
  return {std::move(names), next};
}

std::optional<HttpResponse> Session::CheckFreeName(const TableIdentifier& id) const {
  if (!IsNamespaceDir(NamespaceDir(id.ns))) return NoSuchNamespace(id.ns);
  std::string dir = TableDir(id);
  if (IsTableDir(dir)) {
    return Error(409, "AlreadyExistsException",
                 fmt::format("table {}.{} already exists", Dotted(id.ns), id.name));
  }
  if (IsNamespaceDir(dir)) {
    return Error(409, "AlreadyExistsException",
                 fmt::format("{}.{} is a namespace", Dotted(id.ns), id.name));
  }
  return std::nullopt;
}

Result<std::map<std::string, std::string>> Session::ReadProperties(
    const std::vector<std::string>& ns) const {
  std::string path = NamespaceDir(ns) + "/" + std::string(kNamespaceFile);
  Result<std::string> text = fs_.Read(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::map<std::string, std::string>();
    return text.status();
  }
  ASSIGN_OR_RETURN(Json j, ParseJson(*text, path));
  ASSIGN_OR_RETURN(JsonObject o, JsonObject::Of(j, "$"));
  return o.OptStringMap("properties");
}

Status Session::WriteProperties(const std::vector<std::string>& ns,
                                const std::map<std::string, std::string>& props) const {
  Json j = Json::object();
  j["properties"] = Json::object();
  for (const auto& [k, v] : props) j["properties"][k] = v;
  return fs_.Write(NamespaceDir(ns) + "/" + std::string(kNamespaceFile), j.dump(2) + "\n");
}

HttpResponse Session::Config(const HttpRequest&) {
  static const char* kEndpoints[] = {
      "GET /v1/{prefix}/namespaces",
      "POST /v1/{prefix}/namespaces",
      "GET /v1/{prefix}/namespaces/{namespace}",
      "HEAD /v1/{prefix}/namespaces/{namespace}",
      "DELETE /v1/{prefix}/namespaces/{namespace}",
      "POST /v1/{prefix}/namespaces/{namespace}/properties",
      "GET /v1/{prefix}/namespaces/{namespace}/tables",
      "POST /v1/{prefix}/namespaces/{namespace}/tables",
      "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "POST /v1/{prefix}/namespaces/{namespace}/register",
      "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
      "POST /v1/{prefix}/tables/rename",
  };
  Json endpoints = Json::array();
  for (const char* e : kEndpoints) endpoints.push_back(e);
  return Ok(
      {{"defaults", Json::object()}, {"overrides", Json::object()}, {"endpoints", endpoints}});
}

HttpResponse Session::ListNamespaces(const HttpRequest& req) {
  std::vector<std::string> parent;
  if (auto it = req.query.find("parent"); it != req.query.end() && !it->second.empty()) {
    // The query value is decoded already: levels are separated by 0x1F.
    size_t start = 0;
    while (true) {
      size_t sep = it->second.find('\x1f', start);
      parent.push_back(
          it->second.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
      if (sep == std::string::npos) break;
      start = sep + 1;
    }
    if (Status st = CheckNamespace(parent); !st.ok()) return FromStatus(st);
    if (!IsNamespaceDir(NamespaceDir(parent))) return NoSuchNamespace(parent);
  }
  std::string dir = NamespaceDir(parent);
  std::vector<std::string> names;
  for (const std::string& child : fs_.Subdirs(dir)) {
    if (CheckName(child, "").ok() && IsNamespaceDir(dir + "/" + child)) names.push_back(child);
  }
  if (const CatalogAccess* a = Limited(req)) {
    std::erase_if(names, [&](const std::string& name) {
      std::vector<std::string> ns = parent;
      ns.push_back(name);
      return !a->SeeNamespace(req.principal, ns);
    });
  }
  Status st;
  auto [page, next] = Page(std::move(names), req, &st);
  if (!st.ok()) return FromStatus(st);
  Json list = Json::array();
  for (const std::string& name : page) {
    std::vector<std::string> ns = parent;
    ns.push_back(name);
    list.push_back(NamespaceJson(ns));
  }
  Json out = {{"namespaces", list}};
  if (next) out["next-page-token"] = *next;
  return Ok(out);
}

HttpResponse Session::CreateNamespace(const HttpRequest& req) {
  Result<Json> body = ParseJson(req.body, "CreateNamespaceRequest");
  if (!body.ok()) return FromStatus(body.status());
  Result<JsonObject> o = JsonObject::Of(*body, "$");
  if (!o.ok()) return FromStatus(o.status());
  Result<const Json*> nsj = o->Require("namespace");
  if (!nsj.ok()) return FromStatus(nsj.status());
  Result<std::vector<std::string>> ns = NamespaceFromJson(**nsj, "$.namespace");
  if (!ns.ok()) return FromStatus(ns.status());
  if (Status st = CheckNamespace(*ns); !st.ok()) return FromStatus(st);
  Result<std::map<std::string, std::string>> props = o->OptStringMap("properties");
  if (!props.ok()) return FromStatus(props.status());

  std::lock_guard<std::mutex> lock(mu_);
  std::string dir = NamespaceDir(*ns);
  if (IsNamespaceDir(dir)) {
    return Error(409, "AlreadyExistsException",
                 fmt::format("namespace {} already exists", Dotted(*ns)));
  }
  if (IsTableDir(dir)) {
    return Error(409, "AlreadyExistsException", fmt::format("{} is a table", Dotted(*ns)));
  }
  // A level above that is a table would put the namespace inside the table's files.
  for (size_t i = 1; i < ns->size(); ++i) {
    std::vector<std::string> up(ns->begin(), ns->begin() + static_cast<std::ptrdiff_t>(i));
    if (IsTableDir(NamespaceDir(up))) {
      return Error(400, "BadRequestException",
                   fmt::format("{} is a table, not a namespace", Dotted(up)));
    }
  }
  if (Status st = fs_.MakeDirs(dir); !st.ok()) return FromStatus(st);
  if (Status st = WriteProperties(*ns, *props); !st.ok()) return FromStatus(st);
  Json p = Json::object();
  for (const auto& [k, v] : *props) p[k] = v;
  return Ok({{"namespace", NamespaceJson(*ns)}, {"properties", p}});
}

HttpResponse Session::LoadNamespace(const std::vector<std::string>& ns, bool head) {
  if (!IsNamespaceDir(NamespaceDir(ns)))
    return head ? HttpResponse{.status = 404, .body = ""} : NoSuchNamespace(ns);
  if (head) return NoContent();
  Result<std::map<std::string, std::string>> props = ReadProperties(ns);
  if (!props.ok()) return FromStatus(props.status());
  Json p = Json::object();
  for (const auto& [k, v] : *props) p[k] = v;
  return Ok({{"namespace", NamespaceJson(ns)}, {"properties", p}});
}

HttpResponse Session::DropNamespace(const std::vector<std::string>& ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string dir = NamespaceDir(ns);
  if (!IsNamespaceDir(dir)) return NoSuchNamespace(ns);
  for (const std::string& child : fs_.Subdirs(dir)) {
    std::string path = dir + "/" + child;
    if (IsTableDir(path) || IsNamespaceDir(path)) {
      return Error(409, "NamespaceNotEmptyException",
                   fmt::format("namespace {} is not empty: it holds {} {}", Dotted(ns),
                               IsTableDir(path) ? "table" : "namespace", child));
    }
  }
  if (Status st = fs_.Remove(dir + "/" + std::string(kNamespaceFile)); !st.ok())
    return FromStatus(st);
  // What dropped tables left behind (their data when not purged) stays; an empty
  // directory goes.
  fs_.RemoveIfEmpty(dir);
  return NoContent();
}

HttpResponse Session::UpdateNamespaceProperties(const std::vector<std::string>& ns,
                                                const HttpRequest& req) {
  Result<Json> body = ParseJson(req.body, "UpdateNamespacePropertiesRequest");
  if (!body.ok()) return FromStatus(body.status());
  Result<JsonObject> o = JsonObject::Of(*body, "$");
  if (!o.ok()) return FromStatus(o.status());
  std::vector<std::string> removals;
  Result<const Json*> rj = o->OptArray("removals");
  if (!rj.ok()) return FromStatus(rj.status());
  if (*rj != nullptr) {
    for (size_t i = 0; i < (*rj)->size(); ++i) {
      Result<std::string> k = JsonToString((**rj)[i], JsonPath("$.removals", i));
      if (!k.ok()) return FromStatus(k.status());
      removals.push_back(*k);
    }
  }
  Result<std::map<std::string, std::string>> updates = o->OptStringMap("updates");
  if (!updates.ok()) return FromStatus(updates.status());
  for (const std::string& k : removals) {
    if (updates->count(k) != 0) {
      return Error(422, "UnprocessableEntityException",
                   fmt::format("property \"{}\" is both updated and removed", k));
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (!IsNamespaceDir(NamespaceDir(ns))) return NoSuchNamespace(ns);
  Result<std::map<std::string, std::string>> props = ReadProperties(ns);
  if (!props.ok()) return FromStatus(props.status());
  Json updated = Json::array(), removed = Json::array(), missing = Json::array();
  for (const std::string& k : removals) {
    if (props->erase(k) != 0) {
      removed.push_back(k);
    } else {
      missing.push_back(k);
    }
  }
  for (const auto& [k, v] : *updates) {
    (*props)[k] = v;
    updated.push_back(k);
  }
  if (Status st = WriteProperties(ns, *props); !st.ok()) return FromStatus(st);
  return Ok({{"updated", updated}, {"removed", removed}, {"missing", missing}});
}

HttpResponse Session::ListTables(const std::vector<std::string>& ns, const HttpRequest& req) {
  std::string dir = NamespaceDir(ns);
  if (!IsNamespaceDir(dir)) return NoSuchNamespace(ns);
  std::vector<std::string> names;
  for (const std::string& child : fs_.Subdirs(dir)) {
    if (CheckName(child, "").ok() && IsTableDir(dir + "/" + child)) names.push_back(child);
  }
  if (const CatalogAccess* a = Limited(req)) {
    std::erase_if(names,
                  [&](const std::string& name) { return !a->ReadTable(req.principal, ns, name); });
  }
  Status st;
  auto [page, next] = Page(std::move(names), req, &st);
  if (!st.ok()) return FromStatus(st);
  Json ids = Json::array();
  for (const std::string& name : page) ids.push_back(IdentifierJson(ns, name));
  Json out = {{"identifiers", ids}};
  if (next) out["next-page-token"] = *next;
  return Ok(out);
}

HttpResponse Session::CreateTable(const std::vector<std::string>& ns, const HttpRequest& req) {
  Result<Json> body = ParseJson(req.body, "CreateTableRequest");
  if (!body.ok()) return FromStatus(body.status());
  Result<JsonObject> o = JsonObject::Of(*body, "$");
  if (!o.ok()) return FromStatus(o.status());
  Result<std::string> name = o->String("name");
  if (!name.ok()) return FromStatus(name.status());
  TableIdentifier id{ns, *name};
  if (Status st = CheckName(id.name, "table name"); !st.ok()) return FromStatus(st);

  NewTableOptions opts;
  opts.now_ms = Now();
  Result<const Json*> schema = o->Require("schema");
  if (!schema.ok()) return FromStatus(schema.status());
  Result<Schema> parsed = SchemaFromJson(**schema, "$.schema", false);
  if (!parsed.ok()) return FromStatus(parsed.status());
  opts.schema = std::move(*parsed);
  if (const Json* spec = o->Get("partition-spec")) {
    Result<PartitionSpec> s = PartitionSpecFromJson(*spec, "$.partition-spec", false);
    if (!s.ok()) return FromStatus(s.status());
    opts.spec = std::move(*s);
  }
  if (const Json* order = o->Get("write-order")) {
    Result<SortOrder> s = SortOrderFromJson(*order, "$.write-order");
    if (!s.ok()) return FromStatus(s.status());
    opts.sort_order = std::move(*s);
  }
  Result<std::map<std::string, std::string>> props = o->OptStringMap("properties");
  if (!props.ok()) return FromStatus(props.status());
  opts.properties = std::move(*props);
  // As Java: the format-version property chooses the version and is not kept.
  if (auto it = opts.properties.find("format-version"); it != opts.properties.end()) {
    if (it->second != "1" && it->second != "2") {
      return Error(400, "BadRequestException",
                   fmt::format("format-version \"{}\" is not supported (1 or 2)", it->second));
    }
    opts.format_version = it->second == "1" ? 1 : 2;
    opts.properties.erase(it);
  }
  Result<std::optional<std::string>> location = o->OptString("location");
  if (!location.ok()) return FromStatus(location.status());
  opts.location = location->value_or(DefaultLocation(id));
  if (Status st = CheckInsideWarehouse("location", opts.location); !st.ok()) return FromStatus(st);
  Result<std::optional<bool>> stage = o->OptBool("stage-create");
  if (!stage.ok()) return FromStatus(stage.status());

  Result<TableMetadata> metadata = NewTable(opts);
  if (!metadata.ok()) return FromStatus(metadata.status());
  if (std::optional<HttpResponse> taken = CheckFreeName(id)) return *taken;
  if (stage->value_or(false)) {
    // Nothing is written: the client commits the table later with assert-create.
    Json out = Json::object();
    out["metadata"] = TableMetadataToJson(*metadata);
    out["config"] = Json::object();
    return Ok(out);
  }
  TableFiles files(TableDir(id));
  if (Status st = files.CommitVersion(1, TableMetadataToString(*metadata)); !st.ok()) {
    if (st.code() == StatusCode::kAlreadyExists) {
      return Error(409, "AlreadyExistsException",
                   fmt::format("table {}.{} already exists", Dotted(id.ns), id.name));
    }
    return FromStatus(st);
  }
  return Ok(Vend(req, TableResult(files.VersionPath(1), TableMetadataToJson(*metadata), true)));
}

HttpResponse Session::RegisterTable(const std::vector<std::string>& ns, const HttpRequest& req) {
  Result<Json> body = ParseJson(req.body, "RegisterTableRequest");
  if (!body.ok()) return FromStatus(body.status());
  Result<JsonObject> o = JsonObject::Of(*body, "$");
  if (!o.ok()) return FromStatus(o.status());
  Result<std::string> name = o->String("name");
  if (!name.ok()) return FromStatus(name.status());
  Result<std::string> source = o->String("metadata-location");
  if (!source.ok()) return FromStatus(source.status());
  Result<std::optional<bool>> overwrite = o->OptBool("overwrite");
  if (!overwrite.ok()) return FromStatus(overwrite.status());
  TableIdentifier id{ns, *name};
  if (Status st = CheckName(id.name, "table name"); !st.ok()) return FromStatus(st);

  if (Status st = CheckInsideWarehouse("metadata-location", *source); !st.ok())
    return FromStatus(st);
  Result<std::string> path =
      remote() ? Result<std::string>(NormalLocation(*source)) : LocalPath(*source);
  if (!path.ok()) return FromStatus(path.status());
  Result<std::string> text = fs_.Read(*path);
  if (!text.ok()) {
    return Error(
        400, "BadRequestException",
        fmt::format("cannot read metadata-location {}: {}", *source, text.status().message()));
  }
  Result<TableMetadata> metadata = TableMetadataFromJson(*text);
  if (!metadata.ok()) {
    return Error(400, "BadRequestException",
                 fmt::format("{}: {}", *source, metadata.status().message()));
  }
  if (Status st = CheckInsideWarehouse("the registered table's location", metadata->location);
      !st.ok()) {
    return FromStatus(st);
  }
  TableFiles files(TableDir(id));
  int64_t version = 1;
  if (overwrite->value_or(false) && IsNamespaceDir(NamespaceDir(ns)) && IsTableDir(files.root())) {
    Result<std::optional<MetadataVersion>> current = files.Current();
    if (!current.ok()) return FromStatus(current.status());
    if (!current->has_value()) return NoSuchTable(id);  // dropped meanwhile
    version = (*current)->version + 1;
  } else if (std::optional<HttpResponse> taken = CheckFreeName(id)) {
    return *taken;
  }
  if (Status st = files.CommitVersion(version, *text); !st.ok()) {
    if (st.code() == StatusCode::kAlreadyExists) {
      return Error(409, version == 1 ? "AlreadyExistsException" : "CommitFailedException",
                   fmt::format("table {}.{}: {}", Dotted(id.ns), id.name, st.message()));
    }
    return FromStatus(st);
  }
  return Ok(
      Vend(req, TableResult(files.VersionPath(version), TableMetadataToJson(*metadata), true)));
}

HttpResponse Session::LoadTable(const TableIdentifier& id, const HttpRequest& req) {
  Result<std::optional<MetadataVersion>> current = CurrentOf(TableDir(id));
  if (!current.ok()) return FromStatus(current.status());
  if (!current->has_value()) {
    if (!IsNamespaceDir(NamespaceDir(id.ns))) return NoSuchNamespace(id.ns);
    return NoSuchTable(id);
  }
  Result<TableMetadata> metadata = TableMetadataFromJson((*current)->json);
  if (!metadata.ok()) {
    return Error(500, "ServiceFailureException",
                 fmt::format("{}: {}", (*current)->path, metadata.status().message()));
  }
  std::string snapshots = "all";
  if (auto it = req.query.find("snapshots"); it != req.query.end()) snapshots = it->second;
  if (snapshots == "refs") {
    std::set<int64_t> referenced;
    for (const auto& [name, ref] : metadata->refs) referenced.insert(ref.snapshot_id);
    std::erase_if(metadata->snapshots,
                  [&](const Snapshot& s) { return referenced.count(s.snapshot_id) == 0; });
  } else if (snapshots != "all") {
    return Error(400, "BadRequestException",
                 fmt::format("snapshots must be all or refs, not \"{}\"", snapshots));
  }
  return Ok(Vend(req, TableResult((*current)->path, TableMetadataToJson(*metadata), true)));
}

HttpResponse Session::TableExists(const TableIdentifier& id) {
  return IsTableDir(TableDir(id)) ? NoContent() : HttpResponse{.status = 404, .body = ""};
}

HttpResponse Session::CommitTable(const TableIdentifier& id, const HttpRequest& req) {
  Result<CommitRequest> request = CommitRequestFromJson(req.body);
  if (!request.ok()) return FromStatus(request.status());
  if (request->identifier.is_object()) {
    Result<TableIdentifier> named = TableIdentifierFromJson(request->identifier, "$.identifier");
    if (!named.ok()) return FromStatus(named.status());
    if (named->ns != id.ns || named->name != id.name) {
      return Error(400, "BadRequestException",
                   fmt::format("the identifier {}.{} is not the table of the path, {}.{}",
                               Dotted(named->ns), named->name, Dotted(id.ns), id.name));
    }
  }
  TableFiles files(TableDir(id));
  Result<std::optional<MetadataVersion>> current = CurrentOf(files.root());
  if (!current.ok()) return FromStatus(current.status());

  if (!current->has_value()) {
    // The commit of a staged create (assert-create): the table's version 1.
    bool creates = std::any_of(
        request->requirements.begin(), request->requirements.end(),
        [](const TableRequirement& r) { return r.kind == RequirementKind::kAssertCreate; });
    if (!creates) {
      if (!IsNamespaceDir(NamespaceDir(id.ns))) return NoSuchNamespace(id.ns);
      return NoSuchTable(id);
    }
    if (std::optional<HttpResponse> taken = CheckFreeName(id)) {
      // A namespace of that name (or no parent namespace) refuses it; a table that exists
      // already refuses it at the exclusive create of version 1.
      if (taken->status == 404 || !IsTableDir(TableDir(id))) return *taken;
    }
    // Without a set-location the table lives where the catalog puts it.
    bool located = std::any_of(
        request->updates.begin(), request->updates.end(),
        [](const TableUpdate& u) { return std::holds_alternative<SetLocationUpdate>(u); });
    if (!located)
      request->updates.insert(request->updates.begin(), SetLocationUpdate{DefaultLocation(id)});
    Result<TableMetadata> next = lake::CommitTable(nullptr, "", *request, Now());
    if (!next.ok()) return FromStatus(next.status());
    if (Status st = CheckInsideWarehouse("location", next->location); !st.ok())
      return FromStatus(st);
    if (Status st = files.CommitVersion(1, TableMetadataToString(*next)); !st.ok()) {
      if (st.code() == StatusCode::kAlreadyExists) {
        return Error(
            409, "CommitFailedException",
            fmt::format("table {}.{} was created by another writer", Dotted(id.ns), id.name));
      }
      return FromStatus(st);
    }
    return Ok(TableResult(files.VersionPath(1), TableMetadataToJson(*next), false));
  }

  const MetadataVersion& base_version = **current;
  Result<TableMetadata> base = TableMetadataFromJson(base_version.json);
  if (!base.ok()) {
    return Error(500, "ServiceFailureException",
                 fmt::format("{}: {}", base_version.path, base.status().message()));
  }
  Result<TableMetadata> next =
      lake::CommitTable(&*base, FileUri(base_version.path), *request, Now());
  if (!next.ok()) {
    if (IsCommitConflict(next.status())) {
      return Error(409, "CommitFailedException",
                   fmt::format("table {}.{} at version {}: {}", Dotted(id.ns), id.name,
                               base_version.version, next.status().message()));
    }
    return FromStatus(next.status());
  }
  if (*next == *base) return Ok(TableResult(base_version.path, TableMetadataToJson(*base), false));
  if (next->location != base->location) {
    if (Status st = CheckInsideWarehouse("location", next->location); !st.ok())
      return FromStatus(st);
  }
  int64_t version = base_version.version + 1;
  if (options_.before_commit) options_.before_commit();
  if (Status st = files.CommitVersion(version, TableMetadataToString(*next)); !st.ok()) {
    if (st.code() == StatusCode::kAlreadyExists) {
      return Error(
          409, "CommitFailedException",
          fmt::format("table {}.{}: another commit made version {} first; refresh and retry",
                      Dotted(id.ns), id.name, version));
    }
    return FromStatus(st);
  }
  return Ok(TableResult(files.VersionPath(version), TableMetadataToJson(*next), false));
}

HttpResponse Session::DropTable(const TableIdentifier& id, const HttpRequest& req) {
  std::string dir = TableDir(id);
  Result<std::optional<MetadataVersion>> current = CurrentOf(dir);
  if (!current.ok()) return FromStatus(current.status());
  if (!current->has_value()) {
    if (!IsNamespaceDir(NamespaceDir(id.ns))) return NoSuchNamespace(id.ns);
    return NoSuchTable(id);
  }
  bool purge = false;
  if (auto it = req.query.find("purgeRequested"); it != req.query.end())
    purge = it->second == "true";
  // Retiring the versions is the drop (the table is there until its last version goes);
  // removing the files after it may take a while.
  std::string retired = fmt::format("{}/.metadata.dropped-{}", dir, Now());
  if (Status st = fs_.RetireVersions(dir + "/metadata", retired); !st.ok()) return FromStatus(st);
  // Without purge the versions stay (moved aside) with the data and the manifests: the
  // table can be registered again from them.
  if (purge) {
    fs_.RemoveTree(retired);
    // The data under the table's directory, when that is the table's location (a renamed
    // or registered table's files live elsewhere and are left alone).
    Result<TableMetadata> metadata = TableMetadataFromJson((*current)->json);
    Result<std::string> location = !metadata.ok() ? Result<std::string>(metadata.status())
                                   : remote()
                                       ? Result<std::string>(NormalLocation(metadata->location))
                                       : LocalPath(metadata->location);
    if (location.ok() && *location == dir) {
      fs_.RemoveTree(dir + "/data");
      fs_.RemoveTree(dir + "/metadata");
    }
  }
  fs_.RemoveIfEmpty(dir);  // only when nothing is left
  return NoContent();
}

HttpResponse Session::RenameTable(const HttpRequest& req) {
  Result<Json> body = ParseJson(req.body, "RenameTableRequest");
  if (!body.ok()) return FromStatus(body.status());
  Result<JsonObject> o = JsonObject::Of(*body, "$");
  if (!o.ok()) return FromStatus(o.status());
  Result<const Json*> sj = o->Require("source");
  if (!sj.ok()) return FromStatus(sj.status());
  Result<const Json*> dj = o->Require("destination");
  if (!dj.ok()) return FromStatus(dj.status());
  Result<TableIdentifier> source = TableIdentifierFromJson(**sj, "$.source");
  if (!source.ok()) return FromStatus(source.status());
  Result<TableIdentifier> dest = TableIdentifierFromJson(**dj, "$.destination");
  if (!dest.ok()) return FromStatus(dest.status());
  if (const CatalogAccess* a = Limited(req)) {
    if (!a->CreateIn(req.principal, source->ns) || !a->CreateIn(req.principal, dest->ns)) {
      return Refused(req, fmt::format("renaming table {}.{} to {}.{}", Dotted(source->ns),
                                      source->name, Dotted(dest->ns), dest->name));
    }
  }

  std::string source_dir = TableDir(*source);
  Result<std::optional<MetadataVersion>> current = CurrentOf(source_dir);
  if (!current.ok()) return FromStatus(current.status());
  if (!current->has_value()) return NoSuchTable(*source);
  if (std::optional<HttpResponse> taken = CheckFreeName(*dest)) return *taken;
  TableFiles to(TableDir(*dest));
  if (Status st = to.CommitVersion(1, (*current)->json); !st.ok()) {
    if (st.code() == StatusCode::kAlreadyExists) {
      return Error(409, "AlreadyExistsException",
                   fmt::format("table {}.{} already exists", Dotted(dest->ns), dest->name));
    }
    return FromStatus(st);
  }
  // Retire the old name. A commit to it that lands between the copy and this rename is
  // carried over as the new name's next version; one after it fails (its metadata/ is
  // gone).
  std::string retired = fmt::format("{}/metadata.renamed-{}", source_dir, Now());
  if (Status st = fs_.RetireVersions(source_dir + "/metadata", retired); !st.ok())
    return FromStatus(st);
  for (int64_t v = (*current)->version + 1;; ++v) {
    Result<std::string> later = fs_.Read(fmt::format("{}/v{}.metadata.json", retired, v));
    if (!later.ok()) break;
    if (Status st = to.CommitVersion(v - (*current)->version + 1, *later); !st.ok()) break;
  }
  return NoContent();
}

HttpResponse Session::Route(const HttpRequest& req) {
  std::string_view path = req.path;
  if (!path.starts_with("/v1/"))
    return Error(404, "NotFoundException", fmt::format("no route for {}", path));
  path.remove_prefix(4);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  Result<std::vector<std::string>> segs = SplitPath(path);
  if (!segs.ok()) return FromStatus(segs.status());
  const std::vector<std::string>& s = *segs;
  const std::string& m = req.method;
  auto no_route = [&] {
    return Error(404, "NotFoundException", fmt::format("no route for {}", req.path));
  };
  // A known path asked with a method it does not take.
  auto bad_method = [&] {
    return Error(405, "MethodNotAllowedException", fmt::format("{} does not take {}", req.path, m));
  };

  if (s.size() == 1 && s[0] == "config") return m == "GET" ? Config(req) : bad_method();
  if (s.size() == 2 && s[0] == "tables" && s[1] == "rename")
    return m == "POST" ? RenameTable(req) : bad_method();
  if (s.empty() || s[0] != "namespaces") return no_route();
  if (s.size() == 1) {
    if (auto refused = Check(req, s, nullptr, nullptr)) return *refused;
    if (m == "GET") return ListNamespaces(req);
    if (m == "POST") return CreateNamespace(req);
    return bad_method();
  }
  Result<std::vector<std::string>> ns = DecodeNamespace(s[1]);
  if (!ns.ok()) return FromStatus(ns.status());
  if (Status st = CheckNamespace(*ns); !st.ok()) return FromStatus(st);
  if (s.size() <= 3) {
    if (auto refused = Check(req, s, &*ns, nullptr)) return *refused;
  }
  if (s.size() == 2) {
    if (m == "GET" || m == "HEAD") return LoadNamespace(*ns, m == "HEAD");
    if (m == "DELETE") return DropNamespace(*ns);
    return bad_method();
  }
  if (s.size() == 3 && s[2] == "properties")
    return m == "POST" ? UpdateNamespaceProperties(*ns, req) : bad_method();
  if (s.size() == 3 && s[2] == "register")
    return m == "POST" ? RegisterTable(*ns, req) : bad_method();
  if (s.size() == 3 && s[2] == "tables") {
    if (m == "GET") return ListTables(*ns, req);
    if (m == "POST") return CreateTable(*ns, req);
    return bad_method();
  }
  if ((s.size() == 4 || s.size() == 5) && s[2] == "tables") {
    Result<std::string> name = PercentDecode(s[3]);
    if (!name.ok()) return FromStatus(name.status());
    TableIdentifier id{*ns, *name};
    if (Status st = CheckName(id.name, "table name"); !st.ok()) return FromStatus(st);
    if (auto refused = Check(req, s, &id.ns, &id.name)) return *refused;
    if (s.size() == 5) {
      // Metrics reports are accepted and not kept.
      if (s[4] == "metrics") return m == "POST" ? NoContent() : bad_method();
      return no_route();
    }
    if (m == "GET") return LoadTable(id, req);
    if (m == "HEAD") return TableExists(id);
    if (m == "POST") return CommitTable(id, req);
    if (m == "DELETE") return DropTable(id, req);
    return bad_method();
  }
  return no_route();
}

}  // namespace

Result<std::vector<std::string>> DecodeNamespace(std::string_view encoded) {
  ASSIGN_OR_RETURN(std::string decoded, PercentDecode(encoded));
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t sep = decoded.find('\x1f', start);
    out.push_back(
        decoded.substr(start, sep == std::string::npos ? std::string::npos : sep - start));
    if (sep == std::string::npos) break;
    start = sep + 1;
  }
  return out;
}

RestCatalog::RestCatalog(Options options, std::string warehouse)
    : options_(std::move(options)), warehouse_(std::move(warehouse)) {}

RestCatalog::~RestCatalog() = default;

Result<std::unique_ptr<RestCatalog>> RestCatalog::Open(Options options) {
  if (options.warehouse.empty()) return InvalidArgumentError("the warehouse directory is not set");
  if (IsS3Location(options.warehouse)) {
    std::string root = NormalLocation(options.warehouse);
    RETURN_IF_ERROR(SplitS3Location(root).status());
    RETURN_IF_ERROR(StorageFor(root).status());
    while (root.size() > 5 && root.back() == '/') root.pop_back();
    auto catalog = std::unique_ptr<RestCatalog>(new RestCatalog(std::move(options), root));
    catalog->fs_ = std::make_unique<S3Fs>();
    return catalog;
  }
  std::string dir = options.warehouse;
  if (dir.starts_with("file:")) {
    ASSIGN_OR_RETURN(dir, LocalPath(dir));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IOError("warehouse {}: cannot create: {}", dir, ec.message());
  fs::path abs = fs::canonical(dir, ec);
  if (ec) return IOError("warehouse {}: {}", dir, ec.message());
  std::string root = abs.string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  auto catalog = std::unique_ptr<RestCatalog>(new RestCatalog(std::move(options), std::move(root)));
  catalog->fs_ = std::make_unique<LocalFs>();
  return catalog;
}

HttpResponse RestCatalog::Handle(const HttpRequest& request) const {
  try {
    Session session(warehouse_, *fs_, options_, namespace_mu_);
    return session.Route(request);
  } catch (const std::exception& e) {
    return Error(500, "ServiceFailureException", e.what());
  }
}

}  // namespace sluice::lake
