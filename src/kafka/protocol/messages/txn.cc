// Codecs of the transaction APIs; field order and versions follow Kafka's JSON
// definitions (see txn.h for the rules every message here follows).
#include "kafka/protocol/messages/txn.h"

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

using namespace codec;

// The JSON's validVersions and first flexible version per API.
constexpr ApiSpec kAddPartitionsToTxn{"AddPartitionsToTxn", 5, 3};
constexpr ApiSpec kAddOffsetsToTxn{"AddOffsetsToTxn", 4, 3};
constexpr ApiSpec kEndTxn{"EndTxn", 5, 3};
constexpr ApiSpec kTxnOffsetCommit{"TxnOffsetCommit", 4, 3};

constexpr size_t TxnTopicMin(bool f) { return MinString(f) + MinArray(f) + MinTags(f); }

void ReadTxnTopics(Reader& r, bool f, const char* field, std::vector<TxnTopic>& out) {
  ReadArray(r, f, field, TxnTopicMin(f), out, [&](TxnTopic& t) {
    t.name = r.String(f, "topic name");
    ReadInt32s(r, f, "partitions", t.partitions);
    ReadTags(r, f, &t.unknown_tags);
  });
}

void WriteTxnTopics(Writer& w, bool f, const std::vector<TxnTopic>& topics) {
  WriteArray(w, f, topics, [&](const TxnTopic& t) {
    w.String(f, t.name);
    WriteInt32s(w, f, t.partitions);
    WriteTags(w, f, t.unknown_tags);
  });
}

void ReadTopicErrors(Reader& r, bool f, const char* field, std::vector<TxnTopicErrors>& out) {
  ReadArray(r, f, field, TxnTopicMin(f), out, [&](TxnTopicErrors& t) {
    t.name = r.String(f, "topic name");
    ReadArray(r, f, "partition results", 6 + MinTags(f), t.partitions,
              [&](TxnTopicErrors::Partition& p) {
                p.partition_index = r.Int32("partition index");
                p.error_code = ReadErrorCode(r, "partition error code");
                ReadTags(r, f, &p.unknown_tags);
              });
    ReadTags(r, f, &t.unknown_tags);
  });
}

void WriteTopicErrors(Writer& w, bool f, const std::vector<TxnTopicErrors>& topics) {
  WriteArray(w, f, topics, [&](const TxnTopicErrors& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const TxnTopicErrors::Partition& p) {
      w.Int32(p.partition_index);
      WriteErrorCode(w, p.error_code);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
}

}  // namespace

// ---------------------------------------------------------------- AddPartitionsToTxn

Status AddPartitionsToTxnRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAddPartitionsToTxn, "Request", version));
  *this = {};
  const bool f = version >= kAddPartitionsToTxn.flexible_from;
  if (version >= 4) {
    const size_t txn_min = MinString(f) + 8 + 2 + 1 + MinArray(f) + MinTags(f);
    ReadArray(r, f, "transactions", txn_min, transactions, [&](Transaction& t) {
      t.transactional_id = r.String(f, "transactional id");
      t.producer_id = r.Int64("producer id");
      t.producer_epoch = r.Int16("producer epoch");
      t.verify_only = r.Bool("verify only");
      ReadTxnTopics(r, f, "topics", t.topics);
      ReadTags(r, f, &t.unknown_tags);
    });
  } else {
    v3_and_below_transactional_id = r.String(f, "transactional id");
    v3_and_below_producer_id = r.Int64("producer id");
    v3_and_below_producer_epoch = r.Int16("producer epoch");
    ReadTxnTopics(r, f, "topics", v3_and_below_topics);
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAddPartitionsToTxn, "Request", version);
}

void AddPartitionsToTxnRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAddPartitionsToTxn.flexible_from;
  if (version >= 4) {
    WriteArray(w, f, transactions, [&](const Transaction& t) {
      w.String(f, t.transactional_id);
      w.Int64(t.producer_id);
      w.Int16(t.producer_epoch);
      w.Bool(t.verify_only);
      WriteTxnTopics(w, f, t.topics);
      WriteTags(w, f, t.unknown_tags);
    });
  } else {
    w.String(f, v3_and_below_transactional_id);
    w.Int64(v3_and_below_producer_id);
    w.Int16(v3_and_below_producer_epoch);
    WriteTxnTopics(w, f, v3_and_below_topics);
  }
  WriteTags(w, f, unknown_tags);
}

Status AddPartitionsToTxnResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAddPartitionsToTxn, "Response", version));
  *this = {};
  const bool f = version >= kAddPartitionsToTxn.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  if (version >= 4) {
    error_code = ReadErrorCode(r, "error code");
    const size_t result_min = MinString(f) + MinArray(f) + MinTags(f);
    ReadArray(r, f, "results by transaction", result_min, results_by_transaction, [&](Result& res) {
      res.transactional_id = r.String(f, "transactional id");
      ReadTopicErrors(r, f, "topic results", res.topic_results);
      ReadTags(r, f, &res.unknown_tags);
    });
  } else {
    ReadTopicErrors(r, f, "results by topic", results_by_topic_v3_and_below);
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAddPartitionsToTxn, "Response", version);
}

void AddPartitionsToTxnResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAddPartitionsToTxn.flexible_from;
  w.Int32(throttle_time_ms);
  if (version >= 4) {
    WriteErrorCode(w, error_code);
    WriteArray(w, f, results_by_transaction, [&](const Result& res) {
      w.String(f, res.transactional_id);
      WriteTopicErrors(w, f, res.topic_results);
      WriteTags(w, f, res.unknown_tags);
    });
  } else {
    WriteTopicErrors(w, f, results_by_topic_v3_and_below);
  }
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- AddOffsetsToTxn

Status AddOffsetsToTxnRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAddOffsetsToTxn, "Request", version));
  *this = {};
  const bool f = version >= kAddOffsetsToTxn.flexible_from;
  transactional_id = r.String(f, "transactional id");
  producer_id = r.Int64("producer id");
  producer_epoch = r.Int16("producer epoch");
  group_id = r.String(f, "group id");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAddOffsetsToTxn, "Request", version);
}

void AddOffsetsToTxnRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAddOffsetsToTxn.flexible_from;
  w.String(f, transactional_id);
  w.Int64(producer_id);
  w.Int16(producer_epoch);
  w.String(f, group_id);
  WriteTags(w, f, unknown_tags);
}

Status AddOffsetsToTxnResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAddOffsetsToTxn, "Response", version));
  *this = {};
  const bool f = version >= kAddOffsetsToTxn.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAddOffsetsToTxn, "Response", version);
}

void AddOffsetsToTxnResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAddOffsetsToTxn.flexible_from;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- EndTxn

Status EndTxnRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kEndTxn, "Request", version));
  *this = {};
  const bool f = version >= kEndTxn.flexible_from;
  transactional_id = r.String(f, "transactional id");
  producer_id = r.Int64("producer id");
  producer_epoch = r.Int16("producer epoch");
  committed = r.Bool("committed");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kEndTxn, "Request", version);
}

void EndTxnRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kEndTxn.flexible_from;
  w.String(f, transactional_id);
  w.Int64(producer_id);
  w.Int16(producer_epoch);
  w.Bool(committed);
  WriteTags(w, f, unknown_tags);
}

Status EndTxnResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kEndTxn, "Response", version));
  *this = {};
  const bool f = version >= kEndTxn.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  if (version >= 5) {
    producer_id = r.Int64("producer id");
    producer_epoch = r.Int16("producer epoch");
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kEndTxn, "Response", version);
}

void EndTxnResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kEndTxn.flexible_from;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  if (version >= 5) {
    w.Int64(producer_id);
    w.Int16(producer_epoch);
  }
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- TxnOffsetCommit

Status TxnOffsetCommitRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kTxnOffsetCommit, "Request", version));
  *this = {};
  const bool f = version >= kTxnOffsetCommit.flexible_from;
  transactional_id = r.String(f, "transactional id");
  group_id = r.String(f, "group id");
  producer_id = r.Int64("producer id");
  producer_epoch = r.Int16("producer epoch");
  if (version >= 3) {
    generation_id = r.Int32("generation id");
    member_id = r.String(f, "member id");
    group_instance_id = r.NullableString(f, "group instance id");
  }
  const size_t partition_min = 12 + MinString(f) + MinTags(f);
  ReadArray(r, f, "topics", MinString(f) + MinArray(f) + MinTags(f), topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    ReadArray(r, f, "partitions", partition_min, t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      p.committed_offset = r.Int64("committed offset");
      if (version >= 2) p.committed_leader_epoch = r.Int32("committed leader epoch");
      p.committed_metadata = r.NullableString(f, "committed metadata");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kTxnOffsetCommit, "Request", version);
}

void TxnOffsetCommitRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kTxnOffsetCommit.flexible_from;
  w.String(f, transactional_id);
  w.String(f, group_id);
  w.Int64(producer_id);
  w.Int16(producer_epoch);
  if (version >= 3) {
    w.Int32(generation_id);
    w.String(f, member_id);
    w.NullableString(f, group_instance_id);
  }
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      w.Int64(p.committed_offset);
      if (version >= 2) w.Int32(p.committed_leader_epoch);
      w.NullableString(f, p.committed_metadata);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status TxnOffsetCommitResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kTxnOffsetCommit, "Response", version));
  *this = {};
  const bool f = version >= kTxnOffsetCommit.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadTopicErrors(r, f, "topics", topics);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kTxnOffsetCommit, "Response", version);
}

void TxnOffsetCommitResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kTxnOffsetCommit.flexible_from;
  w.Int32(throttle_time_ms);
  WriteTopicErrors(w, f, topics);
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
