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
constexpr ApiSpec kWriteTxnMarkers{"WriteTxnMarkers", 1, 1};
constexpr ApiSpec kTxnOffsetCommit{"TxnOffsetCommit", 4, 3};
constexpr ApiSpec kDescribeProducers{"DescribeProducers", 0, 0};
constexpr ApiSpec kDescribeTransactions{"DescribeTransactions", 0, 0};
constexpr ApiSpec kListTransactions{"ListTransactions", 1, 0};

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

// ---------------------------------------------------------------- WriteTxnMarkers

Status WriteTxnMarkersRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kWriteTxnMarkers, "Request", version));
  *this = {};
  const bool f = version >= kWriteTxnMarkers.flexible_from;
  const size_t marker_min = 8 + 2 + 1 + MinArray(f) + 4 + MinTags(f);
  ReadArray(r, f, "markers", marker_min, markers, [&](Marker& m) {
    m.producer_id = r.Int64("producer id");
    m.producer_epoch = r.Int16("producer epoch");
    m.transaction_result = r.Bool("transaction result");
    ReadTxnTopics(r, f, "topics", m.topics);
    m.coordinator_epoch = r.Int32("coordinator epoch");
    ReadTags(r, f, &m.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kWriteTxnMarkers, "Request", version);
}

void WriteTxnMarkersRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kWriteTxnMarkers.flexible_from;
  WriteArray(w, f, markers, [&](const Marker& m) {
    w.Int64(m.producer_id);
    w.Int16(m.producer_epoch);
    w.Bool(m.transaction_result);
    WriteTxnTopics(w, f, m.topics);
    w.Int32(m.coordinator_epoch);
    WriteTags(w, f, m.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status WriteTxnMarkersResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kWriteTxnMarkers, "Response", version));
  *this = {};
  const bool f = version >= kWriteTxnMarkers.flexible_from;
  ReadArray(r, f, "markers", 8 + MinArray(f) + MinTags(f), markers, [&](Marker& m) {
    m.producer_id = r.Int64("producer id");
    ReadTopicErrors(r, f, "topics", m.topics);
    ReadTags(r, f, &m.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kWriteTxnMarkers, "Response", version);
}

void WriteTxnMarkersResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kWriteTxnMarkers.flexible_from;
  WriteArray(w, f, markers, [&](const Marker& m) {
    w.Int64(m.producer_id);
    WriteTopicErrors(w, f, m.topics);
    WriteTags(w, f, m.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DescribeProducers

Status DescribeProducersRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeProducers, "Request", version));
  *this = {};
  const bool f = version >= kDescribeProducers.flexible_from;
  ReadTxnTopics(r, f, "topics", topics);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeProducers, "Request", version);
}

void DescribeProducersRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeProducers.flexible_from;
  WriteTxnTopics(w, f, topics);
  WriteTags(w, f, unknown_tags);
}

Status DescribeProducersResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeProducers, "Response", version));
  *this = {};
  const bool f = version >= kDescribeProducers.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  const size_t partition_min = 4 + 2 + MinString(f) + MinArray(f) + MinTags(f);
  const size_t producer_min = 8 + 4 + 4 + 8 + 4 + 8 + MinTags(f);
  ReadArray(r, f, "topics", TxnTopicMin(f), topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    ReadArray(r, f, "partitions", partition_min, t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      p.error_code = ReadErrorCode(r, "error code");
      p.error_message = r.NullableString(f, "error message");
      ReadArray(r, f, "active producers", producer_min, p.active_producers, [&](Producer& s) {
        s.producer_id = r.Int64("producer id");
        s.producer_epoch = r.Int32("producer epoch");
        s.last_sequence = r.Int32("last sequence");
        s.last_timestamp = r.Int64("last timestamp");
        s.coordinator_epoch = r.Int32("coordinator epoch");
        s.current_txn_start_offset = r.Int64("current txn start offset");
        ReadTags(r, f, &s.unknown_tags);
      });
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeProducers, "Response", version);
}

void DescribeProducersResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeProducers.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      WriteErrorCode(w, p.error_code);
      w.NullableString(f, p.error_message);
      WriteArray(w, f, p.active_producers, [&](const Producer& s) {
        w.Int64(s.producer_id);
        w.Int32(s.producer_epoch);
        w.Int32(s.last_sequence);
        w.Int64(s.last_timestamp);
        w.Int32(s.coordinator_epoch);
        w.Int64(s.current_txn_start_offset);
        WriteTags(w, f, s.unknown_tags);
      });
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DescribeTransactions

Status DescribeTransactionsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeTransactions, "Request", version));
  *this = {};
  const bool f = version >= kDescribeTransactions.flexible_from;
  ReadStrings(r, f, "transactional ids", transactional_ids);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeTransactions, "Request", version);
}

void DescribeTransactionsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeTransactions.flexible_from;
  WriteStrings(w, f, transactional_ids);
  WriteTags(w, f, unknown_tags);
}

Status DescribeTransactionsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeTransactions, "Response", version));
  *this = {};
  const bool f = version >= kDescribeTransactions.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  const size_t state_min = 2 + 2 * MinString(f) + 4 + 8 + 8 + 2 + MinArray(f) + MinTags(f);
  ReadArray(r, f, "transaction states", state_min, transaction_states, [&](State& s) {
    s.error_code = ReadErrorCode(r, "error code");
    s.transactional_id = r.String(f, "transactional id");
    s.transaction_state = r.String(f, "transaction state");
    s.transaction_timeout_ms = r.Int32("transaction timeout ms");
    s.transaction_start_time_ms = r.Int64("transaction start time ms");
    s.producer_id = r.Int64("producer id");
    s.producer_epoch = r.Int16("producer epoch");
    ReadTxnTopics(r, f, "topics", s.topics);
    ReadTags(r, f, &s.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeTransactions, "Response", version);
}

void DescribeTransactionsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeTransactions.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, transaction_states, [&](const State& s) {
    WriteErrorCode(w, s.error_code);
    w.String(f, s.transactional_id);
    w.String(f, s.transaction_state);
    w.Int32(s.transaction_timeout_ms);
    w.Int64(s.transaction_start_time_ms);
    w.Int64(s.producer_id);
    w.Int16(s.producer_epoch);
    WriteTxnTopics(w, f, s.topics);
    WriteTags(w, f, s.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- ListTransactions

Status ListTransactionsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kListTransactions, "Request", version));
  *this = {};
  const bool f = version >= kListTransactions.flexible_from;
  ReadStrings(r, f, "state filters", state_filters);
  ReadArray(r, f, "producer id filters", 8, producer_id_filters,
            [&](int64_t& id) { id = r.Int64("producer id filter"); });
  if (version >= 1) duration_filter = r.Int64("duration filter");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kListTransactions, "Request", version);
}

void ListTransactionsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kListTransactions.flexible_from;
  WriteStrings(w, f, state_filters);
  WriteArray(w, f, producer_id_filters, [&](int64_t id) { w.Int64(id); });
  if (version >= 1) w.Int64(duration_filter);
  WriteTags(w, f, unknown_tags);
}

Status ListTransactionsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kListTransactions, "Response", version));
  *this = {};
  const bool f = version >= kListTransactions.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  ReadStrings(r, f, "unknown state filters", unknown_state_filters);
  const size_t state_min = 2 * MinString(f) + 8 + MinTags(f);
  ReadArray(r, f, "transaction states", state_min, transaction_states, [&](State& s) {
    s.transactional_id = r.String(f, "transactional id");
    s.producer_id = r.Int64("producer id");
    s.transaction_state = r.String(f, "transaction state");
    ReadTags(r, f, &s.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kListTransactions, "Response", version);
}

void ListTransactionsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kListTransactions.flexible_from;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  WriteStrings(w, f, unknown_state_filters);
  WriteArray(w, f, transaction_states, [&](const State& s) {
    w.String(f, s.transactional_id);
    w.Int64(s.producer_id);
    w.String(f, s.transaction_state);
    WriteTags(w, f, s.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
