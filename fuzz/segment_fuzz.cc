// Fuzz target for the storage engine's readers of outside bytes: batch validation on
// append, and recovery of a segment file (and its index) found on disk.
// Input: first byte picks the mode; the rest is the data.
//   0: ValidateBatch(data)
//   1: data is the last segment's .log file: open (recover), read everything, verify
//   2: data is a closed segment's .log; an empty active segment follows
//   3: a valid closed segment whose .index file is data
//   4: data is a .txnindex's bytes and a control record's bytes (ParseTxnIndex,
//      ParseControlType, CollectAbortedTxns)
//   5: a valid last segment whose .txnindex file is data: open (recover), collect
//   6: data is a tiered segment's copy from S3 (.log, no index): ReadSegmentFile from
//      every offset, ForEachSegmentFileBatch (what a remote Fetch and ListOffsets read)
//   7: data is a tiered segment's .index (its length first, 2 bytes big-endian) and .log
//      from S3, read in the chunks the index splits it into (SegmentChunkAt), each from a
//      file of its own bytes as a remote Fetch reads them
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/logging.h"
#include "storage/batch_header.h"
#include "storage/log.h"
#include "storage/segment_file.h"
#include "storage/testing/batch_builder.h"
#include "storage/txn_index.h"

using namespace sluice::storage;

namespace {

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void OpenAndReadAll(const std::string& dir, IoExecutor* executor) {
  LogOptions opts;
  opts.executor = executor;
  auto log = PartitionLog::Open(dir, opts);
  if (!log.ok()) return;
  int64_t offset = (*log)->start_offset();
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 10000 && offset < (*log)->written_end_offset(); ++i) {
    auto r = (*log)->Read(offset, 1 << 16);
    if (!r.ok() || r->next_offset <= offset) break;
    if (!PartitionLog::ReadSlice(r->slice, &bytes).ok()) break;
    offset = r->next_offset;
  }
  (void)(*log)->FindOffsetByTimestamp(0);
  (void)(*log)->Verify();
}

// 20 valid batches of 3 records at offsets 0..59.
std::vector<uint8_t> ValidLog() {
  std::vector<uint8_t> log;
  for (int i = 0; i < 20; ++i) {
    auto b = testing::MakeBatch(3, 100, 1000 + i, i);
    AssignOffsets(b, i * 3, 0);
    log.insert(log.end(), b.begin(), b.end());
  }
  return log;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t mode = data[0] % 8;
  ++data;
  --size;
  if (mode == 0) {
    (void)ValidateBatch(std::span<const uint8_t>(data, size), 1 << 20);
    return 0;
  }
  if (mode == 4) {
    std::span<const uint8_t> bytes(data, size);
    TxnIndexContents c = ParseTxnIndex(bytes);
    std::vector<AbortedTxn> out;
    (void)CollectAbortedTxns(c.entries, 0, INT64_MAX, &out);
    int32_t epoch = -1;
    (void)ParseControlType(bytes, &epoch);
    return 0;
  }
  static IoExecutor executor(1);
  static bool quiet = (sluice::SetLogLevel(sluice::LogLevel::kOff), true);
  (void)quiet;
  char tmpl[] = "/dev/shm/sluice-fuzz-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::abort();
  std::string dir = tmpl;
  const std::string seg0 = dir + "/00000000000000000000";
  if (mode == 6) {
    WriteFile(seg0 + ".log", data, size);
    SegmentFile seg;
    if (auto f = Env::Posix()->Open(seg0 + ".log", OpenMode::kRead); f.ok()) {
      seg.log = std::shared_ptr<File>(std::move(*f));
      seg.size = size;
      std::vector<uint8_t> bytes;
      for (int64_t offset = 0; offset < 100; offset += 7) {
        auto r = ReadSegmentFile(seg, offset, 1 << 16, INT64_MAX, EmptyBatches::kSkip);
        if (r.ok()) (void)PartitionLog::ReadSlice(r->slice, &bytes);
      }
      (void)ForEachSegmentFileBatch(
          seg, 0, [&](const BatchHeader& h, uint64_t pos) { return pos + h.total_size() <= size; });
    }
    std::filesystem::remove_all(dir);
    return 0;
  }
  if (mode == 7) {
    const size_t index_bytes = size < 2 ? 0 : std::min<size_t>(size - 2, data[0] << 8 | data[1]);
    const size_t at = std::min<size_t>(size, 2) + index_bytes;
    WriteFile(seg0 + ".index", data + std::min<size_t>(size, 2), index_bytes);
    SegmentFile whole;
    whole.size = size - at;
    if (auto f = Env::Posix()->Open(seg0 + ".index", OpenMode::kRead); f.ok()) {
      whole.index = std::shared_ptr<File>(std::move(*f));
    }
    std::vector<uint8_t> bytes;
    for (uint64_t chunk_bytes : {1, 300, 4096}) {
      uint64_t pos = 0;
      for (int n = 0; n < 200 && pos < whole.size; ++n) {
        auto chunk = SegmentChunkAt(whole, pos, chunk_bytes);
        if (!chunk.ok() || chunk->first > pos || chunk->second <= pos ||
            chunk->second > whole.size) {
          if (chunk.ok()) std::abort();  // a chunk must hold the byte asked for, in the segment
          break;
        }
        const std::string path = seg0 + ".chunk";
        WriteFile(path, data + at + chunk->first, chunk->second - chunk->first);
        SegmentFile part = whole;
        if (auto f = Env::Posix()->Open(path, OpenMode::kRead); f.ok()) {
          part.log = std::shared_ptr<File>(std::move(*f));
          part.from = chunk->first;
          part.end = chunk->second;
          for (int64_t offset = 0; offset < 30; offset += 4) {
            auto r = ReadSegmentFile(part, offset, 1 << 16, INT64_MAX, EmptyBatches::kSkip);
            if (r.ok()) (void)PartitionLog::ReadSlice(r->slice, &bytes);
          }
          (void)ForEachSegmentFileBatch(part, 0, [](const BatchHeader&, uint64_t) { return true; });
        }
        pos = chunk->second;
      }
    }
    std::filesystem::remove_all(dir);
    return 0;
  }
  if (mode == 1) {
    WriteFile(seg0 + ".log", data, size);
  } else if (mode == 2) {
    WriteFile(seg0 + ".log", data, size);
    WriteFile(dir + "/00000000000000100000.log", nullptr, 0);
  } else if (mode == 5) {
    std::vector<uint8_t> log = ValidLog();
    WriteFile(seg0 + ".log", log.data(), log.size());
    WriteFile(seg0 + ".txnindex", data, size);
    LogOptions opts;
    opts.executor = &executor;
    if (auto opened = PartitionLog::Open(dir, opts); opened.ok()) {
      (void)(*opened)->CollectAbortedTxns(0, INT64_MAX);
      (void)(*opened)->CollectAbortedTxns(30, 31);
    }
    std::filesystem::remove_all(dir);
    return 0;
  } else {
    std::vector<uint8_t> log = ValidLog();
    WriteFile(seg0 + ".log", log.data(), log.size());
    WriteFile(seg0 + ".index", data, size);
    WriteFile(dir + "/00000000000000000060.log", nullptr, 0);
  }
  OpenAndReadAll(dir, &executor);
  std::filesystem::remove_all(dir);
  return 0;
}
