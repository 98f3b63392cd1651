// The `sluice` command: argument parsing and wiring only; the work lives in the modules.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/crc32c.h"
#include "base/logging.h"
#include "bench/disk_bench.h"
#include "duck/database.h"

namespace {

constexpr const char* kVersion = "0.1.0";

void AddDiskBenchOptions(CLI::App* cmd, sluice::bench::DiskBenchOptions* o) {
  cmd->add_option("--bytes-per-cell", o->bytes_per_cell, "bytes written per cell (default 8 GiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  cmd->add_option("--record-bytes", o->record_bytes, "value bytes per record")->capture_default_str();
  cmd->add_option("--records-per-batch", o->records_per_batch, "records per batch")->capture_default_str();
  cmd->add_option("--in-flight", o->in_flight, "appends in flight per writer")->capture_default_str();
  cmd->add_option("--writers", o->writers, "writers for the multi-writer row (0 = one per core)");
  cmd->add_option("--dir", o->dir, "directory on the disk under test")->capture_default_str();
  cmd->add_option("--tmpfs-dir", o->tmpfs_dir, "directory on a tmpfs")->capture_default_str();
  cmd->add_option("--flush", o->flush, "flush modes to run: interval, durable, tmpfs")
      ->delimiter(',');
  cmd->add_flag("--json", o->json, "one JSON object per row instead of a table");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: a Kafka-compatible broker, SQL pipelines and SQL over lake tables, in one binary"};
  // 0 or 1 here, checked after parsing: with exactly 1 required, CLI11 reports an
  // unknown subcommand as "a subcommand is required", which misleads.
  app.require_subcommand(0, 1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")->capture_default_str();

  auto* version = app.add_subcommand("version", "print versions of sluice and its libraries");

  sluice::bench::DiskBenchOptions demo_opts;
  demo_opts.bytes_per_cell = 256ull << 20;
  auto* demo = app.add_subcommand(
      "demo", "run sluice's main job end to end on embedded defaults (today: the storage benchmark at 256 MiB per cell)");
  AddDiskBenchOptions(demo, &demo_opts);

  auto* bench = app.add_subcommand("bench", "benchmarks; each prints a table and what it ran on");
  bench->require_subcommand(0, 1);
  sluice::bench::DiskBenchOptions disk_opts;
  auto* disk = bench->add_subcommand("disk", "storage engine append rate beside the raw disk write rate");
  AddDiskBenchOptions(disk, &disk_opts);

  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty() || (bench->parsed() && bench->get_subcommands().empty())) {
    std::fputs((bench->parsed() ? bench->help() : app.help()).c_str(), stderr);
    return 2;
  }

  auto level = sluice::ParseLogLevel(log_level);
  if (!level.ok()) {
    std::fprintf(stderr, "sluice: %s\n", level.status().message().c_str());
    return 2;
  }
  sluice::SetLogLevel(*level);

  if (version->parsed()) {
    fmt::print("sluice {}\nduckdb {}\ncrc32c {}\n", kVersion, sluice::duck::LibraryVersion(),
               sluice::crc32c::HardwareAccelerated() ? "sse4.2" : "portable");
    return 0;
  }
  if (demo->parsed()) {
    fmt::print("sluice demo: the storage engine benchmark at {} MiB per cell. At this size the\n"
               "page cache hides the disk, so the disk ratios are not the engine's: the full run\n"
               "is `sluice bench disk` (8 GiB per cell), its figures in docs/benchmarks.md.\n\n",
               demo_opts.bytes_per_cell >> 20);
    std::fflush(stdout);
    return sluice::bench::RunDiskBench(demo_opts);
  }
  if (disk->parsed()) return sluice::bench::RunDiskBench(disk_opts);
  return 0;
}
