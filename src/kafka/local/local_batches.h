// Record batches (format v2) read in-process from a partition's log, turned into consumer
// records (kafka::client::Message) the way Kafka's Java consumer turns a Fetch answer into
// records (CompletedFetch): whole batches in order, the CRC of each checked, control batches
// skipped, under read_committed the batches of aborted transactions skipped, records before
// the fetch offset skipped. See docs/design/0023-native-path.md (decision 3).
//
// The bytes are what the broker's segment files hold, from the batch that holds the fetch
// offset on: a trailing partial batch (a read cut short by its size bound) is normal and is
// left for the next read; anything else that is not a good batch is an error.
//
// Views: the key and value of a record of an uncompressed batch point into the caller's
// bytes (no copy); those of a compressed batch point into a buffer the decoder holds until
// the caller releases that Decode's generation (ReleaseUpTo). Message::topic points at the
// caller's topic string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/client/consumer.h"  // Message only: a plain struct, no librdkafka link needed
#include "kafka/protocol/records.h"

namespace sluice::kafka::local {

// An aborted transaction a Fetch answer lists with the bytes (FetchResponse's
// aborted_transactions for the partition): its producer and the offset of its first record.
struct AbortedTransaction {
  int64_t producer_id = -1;
  int64_t first_offset = -1;
};

struct DecoderOptions {
  // Check every batch's CRC-32C (librdkafka's check.crcs, off there by default; a batch
  // read in-process costs one pass over bytes already in cache).
  bool check_crcs = true;
  // Largest records section a compressed batch may decompress to (ValidateOptions's
  // decompression bomb guard); more is ResourceExhausted.
  size_t max_decompressed_bytes = size_t{64} << 20;
};

// One partition's fetched bytes, what Decode reads.
struct FetchedBytes {
  std::string_view topic;  // Message::topic views it: must outlive the messages
  int32_t partition = -1;
  // Batches as the log holds them, the last one possibly partial. Must outlive the
  // messages (uncompressed batches' keys and values view it).
  std::span<const uint8_t> bytes;
  int64_t fetch_offset = 0;  // records before it are skipped
  bool read_committed = false;
  // read_committed only: the aborted transactions overlapping the bytes (those with their
  // abort marker at or past fetch_offset and their first record before the read's end, as
  // the broker lists them), in any order.
  // Nothing carries over from one Decode to the next (as from one Fetch answer to the next
  // in Java's consumer).
  std::span<const AbortedTransaction> aborted;
};

struct [[nodiscard]] DecodeResult {
  // Where the next read starts: past the last whole batch consumed (its base offset + last
  // offset delta + 1, so past control, aborted and record-less batches too); fetch_offset
  // when none was. Never less than fetch_offset.
  int64_t next_offset = 0;
  // The whole batches' bytes, from the start of `bytes`. Less than all of them when a
  // partial batch ends them (or a batch is corrupt: see status); none when the first batch
  // is partial, which a Fetch-like read (at least the first batch whole) never gives unless
  // its length field is wrong.
  size_t bytes_consumed = 0;
  int32_t batches_consumed = 0;
  // The tag of the buffers this Decode's messages may view: ReleaseUpTo(generation) once
  // they are no longer used.
  uint64_t generation = 0;
  // Not OK when a batch is corrupt: its messages are not appended, those of the batches
  // before it are (and counted above). The message names the partition, the batch (its
  // index in `bytes`, its byte and base offset) and what was wrong. Codes: Corruption (a
  // CRC mismatch, a malformed header or record), ResourceExhausted (a batch decompresses
  // to more than max_decompressed_bytes), Unimplemented (compression codec 5-7).
  Status status;
};

// Decodes fetched batches into messages, owning the decompressed buffers the messages of
// compressed batches view.
//
// Lifecycle: Decode any number of times (any partitions), each returning a generation;
// ReleaseUpTo(g) frees the buffers of every Decode of generation <= g, so a caller holding
// several decoded fetches as read-ahead releases them in order. Not thread-safe: one owner
// (the pipeline source's thread).
class BatchDecoder {
 public:
  explicit BatchDecoder(DecoderOptions options = {}) : options_(options) {}
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // Appends to `*out` a message for every record at or after fetch_offset of the whole
  // batches in `fetched.bytes`, stopping at the first corrupt batch (see DecodeResult).
  DecodeResult Decode(const FetchedBytes& fetched, std::vector<kafka::client::Message>* out);

  // Frees the buffers of the Decodes of generation <= `generation`: their messages must no
  // longer be used (those of uncompressed batches stay valid while the caller's bytes do).
  void ReleaseUpTo(uint64_t generation);
  void ReleaseAll() { ReleaseUpTo(generation_); }

  // Decompressed bytes held for messages not yet released (for a read-ahead bound).
  size_t held_bytes() const { return held_bytes_; }
  size_t held_batches() const { return held_.size(); }

 private:
  // The decompressed records of one compressed batch: its reader keeps them while it is
  // not opened again.
  struct Held {
    uint64_t generation;
    std::unique_ptr<RecordReader> reader;
  };

  Status DecodeBatch(const FetchedBytes& fetched, std::span<const uint8_t> batch,
                     uint64_t generation, int64_t* position,
                     std::vector<kafka::client::Message>* out);
  Status AppendBatch(const FetchedBytes& fetched, std::span<const uint8_t> batch,
                     const storage::BatchHeader& header, uint64_t generation, int64_t* position,
                     std::vector<kafka::client::Message>* out);
  Status AppendRecords(const FetchedBytes& fetched, const storage::BatchHeader& header,
                       RecordReader* reader, int64_t* position,
                       std::vector<kafka::client::Message>* out);

  // read_committed bookkeeping, for one Decode (Java's CompletedFetch): the aborted
  // transactions by first offset, and the producers whose aborted transaction is open.
  void StartTransactions(const FetchedBytes& fetched);
  void AbortTransactionsUpTo(int64_t offset);
  bool ProducerAborted(int64_t producer_id) const;
  void EndAbortedTransaction(int64_t producer_id);

  DecoderOptions options_;
  RecordReader reader_;  // uncompressed batches: views into the caller's bytes
  Record record_;        // reused: its header vector keeps its capacity
  std::deque<Held> held_;
  size_t held_bytes_ = 0;
  uint64_t generation_ = 0;
  std::vector<AbortedTransaction> pending_aborts_;  // by first offset
  size_t next_abort_ = 0;
  std::vector<int64_t> aborted_producers_;  // sorted
};

}  // namespace sluice::kafka::local
