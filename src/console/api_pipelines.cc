// ConsoleApi's /api/v1/pipelines (docs/design/0026-console.md, phase B): the pipelines of
// `sluice serve --pipelines DIR` as the files of that folder, checked line by line,
// previewed over sampled messages, written, restarted and removed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "console/api.h"
#include "console/api_util.h"
#include "console/history.h"
#include "console/message_view.h"
#include "pipeline/error_phase.h"

namespace sluice::console {
namespace {

using namespace api_util;  // NOLINT: the API's answers and input checks

Json InfoJson(const PipelineInfo& p) {
  return Json{{"name", p.name},
              {"file", p.file},
              {"state", p.running ? "running" : (p.error.empty() ? "stopped" : "failed")},
              {"stopped", p.stopped},
              {"error", p.error.empty() ? Json(nullptr) : Json(p.error)},
              {"messages_in", p.messages_in},
              {"memory_limit_bytes", p.memory_limit_bytes}};
}

Json CheckJson(const PipelineCheck& c) {
  Json problems = Json::array();
  for (const auto& p : c.problems) {
    problems.push_back(
        Json{{"line", p.line == 0 ? Json(nullptr) : Json(p.line)}, {"message", p.message}});
  }
  return Json{
      {"valid", c.valid},       {"name", c.valid ? Json(c.name) : Json(nullptr)},
      {"topics", c.topics},     {"problems", problems},
      {"warnings", c.warnings}, {"description", c.valid ? Json(c.description) : Json(nullptr)}};
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read {}: {}", path, std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to `path` through a temporary file of its own and a rename, so that the
// folder never holds half a pipeline; the file keeps the mode of the one it replaces (a
// pipeline file may hold credentials), a new one is 0600.
Status WriteText(const std::string& path, std::string_view text) {
  std::string tmp = path + ".console-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IOError("cannot write {}: {}", tmp, std::strerror(errno));
  struct stat old {};
  const mode_t mode = ::stat(path.c_str(), &old) == 0 ? (old.st_mode & 07777) : 0600;
  (void)::fchmod(fd, mode);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IOError("cannot write {}: {}", tmp, std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IOError("cannot write {}: {}", tmp, std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return IOError("cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
  }
  return Status::OK();
}

// The problems of a pipeline whose file does not check, as the answer (422 would do too;
// 400 is what every other bad input gets here).
HttpResponse Invalid(const PipelineCheck& c) {
  Json body = CheckJson(c);
  std::string first =
      c.problems.empty() ? "the pipeline file does not check" : c.problems.front().message;
  body["error"] = Json{{"code", "INVALID_PIPELINE"}, {"message", first}};
  return JsonResponse(400, body);
}

}  // namespace

HttpResponse ConsoleApi::PipelineHistory(const std::string& name, PipelineControl& control) {
  History::PipelineSeries h = history_->Pipeline(name);
  Json series = Json::object();
  for (const auto& [key, values] : h.series) series[key] = SeriesJson(values);
  Json errors = Json::object();
  for (pipeline::ErrorPhase phase : pipeline::kErrorPhases) errors[std::string(Name(phase))] = 0;
  for (const auto& [labels, v] :
       options_.metrics->ValuesLabeled("sluice_pipeline_errors_total", "pipeline", name)) {
    for (const auto& [k, phase] : labels) {
      if (k == "phase") errors[phase] = static_cast<uint64_t>(v);
    }
  }
  Json letters = Json::array();
  for (const pipeline::RecentFailure& f : control.RecentFailures(name)) {
    const pipeline::DeadLetter& l = f.letter;
    Json value = nullptr;
    if (l.value) {
      ShownBytes shown = ShowBytes(*l.value, BinaryAs::kHex, f.value_size);
      value =
          Json{{"text", shown.text}, {"encoding", shown.encoding}, {"truncated", shown.truncated}};
    }
    const bool row = l.partition < 0;  // a result row, not a message
    letters.push_back(Json{{"time_ms", f.time_ms},
                           {"phase", std::string(Name(l.phase))},
                           {"error", l.error},
                           {"dead_lettered", f.dead_lettered},
                           {"topic", row ? Json(nullptr) : Json(l.topic)},
                           {"partition", row ? Json(nullptr) : Json(l.partition)},
                           {"offset", row ? Json(nullptr) : Json(l.offset)},
                           {"value", value}});
  }
  return JsonResponse(200, Json{{"name", name},
                                {"step_ms", History::kStep.count()},
                                {"time_ms", h.time_ms},
                                {"series", series},
                                {"errors_total", errors},
                                {"dead_letters", letters}});
}

HttpResponse ConsoleApi::Pipelines(const HttpRequest& req, const std::vector<std::string>& path) {
  PipelineControl* control = options_.pipelines;
  // One change of the folder at a time: a write, its start and its undo are one step.
  static std::mutex changes;
  // Reading the list is for everyone who may log in; a pipeline's file (it may hold
  // credentials) and every check, preview and change are not.
  const bool listing = path.size() == 1 && (req.method == "GET" || req.method == "HEAD");
  if (!listing && options_.may_run_pipelines && !options_.may_run_pipelines(req.principal)) {
    return ErrorResponse(403, "PIPELINES_NEED_SUPER_USER",
                         "pipelines run SQL, sinks and templates as the sluice process: only "
                         "a super user (authorization.super_users) may read, check, preview or "
                         "change them, or anyone on a loopback HTTP port without logins");
  }
  // Checking and previewing need no folder: a page may try a pipeline before there is one.
  if (path.size() == 2 && path[1] == "validate") {
    if (req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body = ParseBody(req, {"yaml"});
    if (!body.ok()) return BadRequest(body.status().message());
    auto yaml = body->find("yaml");
    if (yaml == body->end() || !yaml->is_string()) return BadRequest("'yaml' must be a string");
    return JsonResponse(200, CheckJson(CheckPipeline(yaml->get<std::string>())));
  }
  if (path.size() == 2 && path[1] == "preview") {
    if (req.method != "POST") return MethodNotAllowed(req);
    Result<Json> body = ParseBody(req, {"yaml", "limit"});
    if (!body.ok()) return BadRequest(body.status().message());
    auto yaml = body->find("yaml");
    if (yaml == body->end() || !yaml->is_string()) return BadRequest("'yaml' must be a string");
    Result<int64_t> limit = IntField(*body, "limit", 20);
    if (!limit.ok()) return BadRequest(limit.status().message());
    if (*limit < 1 || *limit > 500) return BadRequest("'limit' must be from 1 to 500");
    const std::string text = yaml->get<std::string>();
    PipelineCheck check = CheckPipeline(text);
    if (!check.valid) return Invalid(check);
    // The newest messages of the source's first topic, from this broker.
    const std::string topic = check.topics.empty() ? "" : check.topics.front();
    OpsLease ops = Lease(req.principal);
    if (!ops.status().ok()) return FromStatus(ops.status());
    MessageQuery q;
    q.topic = topic;
    q.limit = static_cast<int>(*limit);
    Result<MessagePage> page = ops->ReadMessages(q);
    if (!page.ok()) return FromStatus(page.status());
    Result<PipelinePreview> preview = PreviewPipeline(text, topic, page->records);
    if (!preview.ok()) {
      if (preview.status().code() == StatusCode::kResourceExhausted) {
        HttpResponse busy = ErrorResponse(429, "PREVIEW_BUSY", preview.status().message());
        busy.headers.emplace_back("Retry-After", "2");
        return busy;
      }
      return ErrorResponse(400, "PREVIEW_FAILED", preview.status().message());
    }
    Json rows = Json::array();
    for (const std::string& row : preview->rows) {
      Json parsed = Json::parse(row, nullptr, /*allow_exceptions=*/false);
      rows.push_back(parsed.is_discarded() ? Json(row) : std::move(parsed));
    }
    return JsonResponse(200, Json{{"topic", topic},
                                  {"messages", preview->messages},
                                  {"rows", rows},
                                  {"errors", preview->errors}});
  }
  if (control == nullptr) {
    return ErrorResponse(404, "PIPELINES_OFF",
                         "this sluice serve runs no pipelines folder: start it with "
                         "--pipelines DIR");
  }
  if (path.size() == 1) {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    Json list = Json::array();
    for (const PipelineInfo& p : control->List()) list.push_back(InfoJson(p));
    return JsonResponse(200, Json{{"dir", control->dir()},
                                  {"memory_budget_bytes", control->memory_budget_bytes()},
                                  {"memory_in_use_bytes", control->memory_in_use_bytes()},
                                  {"pipelines", list}});
  }
  const std::string& name = path[1];
  if (!ValidPipelineName(name)) {
    return ErrorResponse(400, "INVALID_PIPELINE_NAME",
                         fmt::format("'{}' is not a pipeline name: 1 to 100 of A-Z a-z 0-9 . _ "
                                     "-, not starting with '.'",
                                     name));
  }
  std::unique_lock<std::mutex> lock(changes, std::defer_lock);
  if (req.method != "GET" && req.method != "HEAD") lock.lock();
  std::optional<PipelineInfo> current;
  for (PipelineInfo& p : control->List()) {
    if (p.name == name) current = std::move(p);
  }
  // A file the folder only links to (or holds elsewhere) is not the console's to rewrite
  // or remove: the link's target may be anyone's.
  auto in_folder = [&](const std::string& file) {
    const size_t slash = file.rfind('/');
    if (slash == std::string::npos) return false;
    std::error_code ec;
    const auto folder = std::filesystem::canonical(control->dir(), ec);
    if (ec || std::filesystem::path(file.substr(0, slash)) != folder) return false;
    struct stat st {};
    const std::string entry = control->dir() + "/" + file.substr(slash + 1);
    return ::lstat(entry.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  const bool renames = path.size() == 3 && (path[2] == "stop" || path[2] == "start");
  // A restart of a stopped pipeline renames its file too.
  const bool restarts = path.size() == 3 && path[2] == "restart";
  if (current && (req.method == "PUT" || req.method == "DELETE" || renames || restarts) &&
      !in_folder(current->file)) {
    return ErrorResponse(409, "PIPELINE_FILE_ELSEWHERE",
                         fmt::format("{} is not a file of {} itself (a link, or elsewhere): change "
                                     "it there",
                                     current->file, control->dir()));
  }
  if (path.size() == 2) {
    if (req.method == "GET" || req.method == "HEAD") {
      if (!current)
        return ErrorResponse(404, "UNKNOWN_PIPELINE", fmt::format("no pipeline '{}'", name));
      Json out = InfoJson(*current);
      Result<std::string> text = ReadText(current->file);
      out["yaml"] = text.ok() ? Json(*text) : Json(nullptr);
      return JsonResponse(200, out);
    }
    if (req.method == "PUT") {
      Result<Json> body = ParseBody(req, {"yaml"});
      if (!body.ok()) return BadRequest(body.status().message());
      auto yaml = body->find("yaml");
      if (yaml == body->end() || !yaml->is_string()) return BadRequest("'yaml' must be a string");
      const std::string text = yaml->get<std::string>();
      PipelineCheck check = CheckPipeline(text);
      if (!check.valid) return Invalid(check);
      if (!check.name.empty() && check.name != name) {
        return ErrorResponse(400, "INVALID_PIPELINE_NAME",
                             fmt::format("the file names the pipeline '{}' (pipeline.name), not "
                                         "'{}'",
                                         check.name, name));
      }
      // An existing pipeline keeps its file; a new one gets <dir>/<name>.yaml.
      const std::string file = current ? current->file : control->dir() + "/" + name + ".yaml";
      std::optional<std::string> previous;
      if (current) {
        // Renamed or removed by hand while sluice runs (the folder is read when it starts):
        // a file written now would be a second one of that pipeline.
        if (::access(file.c_str(), F_OK) != 0) {
          return ErrorResponse(409, "PIPELINE_FILE_GONE",
                               fmt::format("{} is gone from the folder since sluice read it: "
                                           "restart sluice serve to read the folder again",
                                           file));
        }
        Result<std::string> old = ReadText(file);
        if (old.ok()) previous = std::move(*old);
      } else {
        for (const std::string& f : {file, file + ".stopped"}) {
          if (::access(f.c_str(), F_OK) == 0) {
            return ErrorResponse(409, "PIPELINE_FILE_EXISTS",
                                 fmt::format("{} exists but is no pipeline's file sluice read: "
                                             "restart sluice serve to read the folder again",
                                             f));
          }
        }
      }
      if (Status st = WriteText(file, text); !st.ok()) return FromStatus(st);
      Status applied = control->Apply(file, !current.has_value(), name);
      if (!applied.ok()) {
        // Nothing changed running: the folder goes back to what it held.
        Status undone = previous
                            ? WriteText(file, *previous)
                            : (::unlink(file.c_str()) == 0 || errno == ENOENT
                                   ? Status::OK()
                                   : IOError("cannot remove {}: {}", file, std::strerror(errno)));
        if (!undone.ok()) {
          return ErrorResponse(500, "IO_ERROR",
                               fmt::format("not started ({}), and the folder could not be put "
                                           "back: {}",
                                           applied.message(), undone.message()));
        }
        return ErrorResponse(applied.code() == StatusCode::kInvalidArgument ? 400 : 409,
                             "PIPELINE_NOT_STARTED", applied.message());
      }
      for (const PipelineInfo& p : control->List()) {
        if (p.name == name) return JsonResponse(current ? 200 : 201, InfoJson(p));
      }
      return JsonResponse(current ? 200 : 201, Json{{"name", name}, {"file", file}});
    }
    if (req.method == "DELETE") {
      if (!current)
        return ErrorResponse(404, "UNKNOWN_PIPELINE", fmt::format("no pipeline '{}'", name));
      // Its file must be removable before it stops, else it would start again next time.
      if (::access(control->dir().c_str(), W_OK) != 0) {
        return ErrorResponse(500, "IO_ERROR",
                             fmt::format("{} cannot be removed ({}): the pipeline keeps running",
                                         current->file, std::strerror(errno)));
      }
      if (Status st = control->Remove(name); !st.ok()) return FromStatus(st);
      // Its file goes too, else the next reload would start it again.
      if (::unlink(current->file.c_str()) != 0 && errno != ENOENT) {
        return ErrorResponse(500, "IO_ERROR",
                             fmt::format("stopped, but {} could not be removed: {}", current->file,
                                         std::strerror(errno)));
      }
      return NoContent();
    }
    return MethodNotAllowed(req);
  }
  if (path.size() == 3 && path[2] == "history") {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    if (!current)
      return ErrorResponse(404, "UNKNOWN_PIPELINE", fmt::format("no pipeline '{}'", name));
    return PipelineHistory(name, *control);
  }
  if (renames) {
    if (req.method != "POST") return MethodNotAllowed(req);
    if (!current)
      return ErrorResponse(404, "UNKNOWN_PIPELINE", fmt::format("no pipeline '{}'", name));
    const bool stop = path[2] == "stop";
    Status st = stop ? control->Stop(name) : control->Start(name);
    if (!st.ok()) {
      if (st.code() == StatusCode::kResourceExhausted)
        return ErrorResponse(400, "PIPELINE_OVER_BUDGET", st.message());
      if (st.code() == StatusCode::kNotFound)
        return ErrorResponse(404, "UNKNOWN_PIPELINE", st.message());
      return ErrorResponse(409, stop ? "PIPELINE_NOT_STOPPED" : "PIPELINE_NOT_STARTED",
                           st.message());
    }
    for (const PipelineInfo& p : control->List()) {
      if (p.name == name) return JsonResponse(200, InfoJson(p));
    }
    return NoContent();
  }
  if (path.size() == 3 && path[2] == "restart") {
    if (req.method != "POST") return MethodNotAllowed(req);
    if (!current)
      return ErrorResponse(404, "UNKNOWN_PIPELINE", fmt::format("no pipeline '{}'", name));
    if (Status st = control->Restart(name); !st.ok()) {
      if (st.code() == StatusCode::kResourceExhausted)
        return ErrorResponse(400, "PIPELINE_OVER_BUDGET", st.message());
      return ErrorResponse(409, "PIPELINE_NOT_STARTED", st.message());
    }
    for (const PipelineInfo& p : control->List()) {
      if (p.name == name) return JsonResponse(200, InfoJson(p));
    }
    return NoContent();
  }
  return ErrorResponse(404, "NOT_FOUND", fmt::format("no such API: {}", req.path));
}

}  // namespace sluice::console
