// Test helpers for src/schema/protobuf: hand-built Protobuf wire bytes, and a DuckDB table
// that decoded payloads are appended to and read back from with SQL.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "duck/appender.h"
#include "duck/database.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema::protobuf::testing {

// Protobuf wire bytes, field by field.
class Wire {
 public:
  Wire& Varint(int field, uint64_t v) {
    Tag(field, 0);
    Raw(v);
    return *this;
  }
  Wire& Sint(int field, int64_t v) {
    return Varint(field, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  Wire& Fixed64(int field, uint64_t v) {
    Tag(field, 1);
    b_.append(reinterpret_cast<const char*>(&v), 8);
    return *this;
  }
  Wire& Fixed32(int field, uint32_t v) {
    Tag(field, 5);
    b_.append(reinterpret_cast<const char*>(&v), 4);
    return *this;
  }
  Wire& Double(int field, double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    return Fixed64(field, v);
  }
  Wire& Float(int field, float f) {
    uint32_t v;
    std::memcpy(&v, &f, 4);
    return Fixed32(field, v);
  }
  Wire& Bytes(int field, std::string_view s) {
    Tag(field, 2);
    Raw(s.size());
    b_.append(s);
    return *this;
  }
  Wire& Message(int field, const Wire& w) { return Bytes(field, w.str()); }
  Wire& Tag(int field, int wire) {
    Raw((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
    return *this;
  }
  Wire& Raw(uint64_t v) {
    while (v >= 0x80) {
      b_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    b_.push_back(static_cast<char>(v));
    return *this;
  }
  Wire& Append(std::string_view s) {
    b_.append(s);
    return *this;
  }
  const std::string& str() const { return b_; }

 private:
  std::string b_;
};

using Rows = std::vector<std::vector<std::optional<std::string>>>;

inline Parsed MustParse(std::string_view text, const std::vector<Reference>& refs = {}) {
  auto p = Parse(text, refs);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) std::abort();
  return std::move(p).value();
}

// An in-memory database with table `t`, filled by a decoder.
class DuckTable {
 public:
  DuckTable() {
    db_ = std::move(duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1}).value());
    conn_ = std::move(duck::Connection::Open(*db_).value());
  }

  void Exec(const std::string& sql) {
    Status st = conn_->Execute(sql);
    ASSERT_TRUE(st.ok()) << sql << ": " << st.ToString();
  }
  Rows Query(const std::string& sql) {
    auto r = conn_->QueryText(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    return r.ok() ? *r : Rows{};
  }
  std::string One(const std::string& sql) {
    Rows r = Query(sql);
    if (r.size() != 1 || r[0].size() != 1) return "<not one value>";
    return r[0][0].value_or("NULL");
  }

  // Creates `t (<columns_sql>)`, decodes `payloads` into it, returns each failure's reason
  // ("" for a row decoded). The decoder's error, when it cannot be made, is in `*status`.
  std::vector<std::string> Decode(const Parsed& schema, const std::string& columns_sql,
                                  const std::vector<std::string>& payloads,
                                  std::vector<int> indexes = {0}, Status* status = nullptr) {
    Exec("CREATE OR REPLACE TABLE t (" + columns_sql + ")");
    // Twice: LogicalType::Copy does not copy MAP types.
    auto described = duck::DescribeTable(*conn_, "t");
    auto again = duck::DescribeTable(*conn_, "t");
    EXPECT_TRUE(described.ok() && again.ok());
    std::vector<Column> columns;
    std::vector<duck::LogicalType> types;
    for (duck::TableColumn& c : *described) columns.push_back({c.name, std::move(c.type)});
    for (duck::TableColumn& c : *again) types.push_back(std::move(c.type));
    return DecodeInto(schema, columns, types, payloads, indexes, status);
  }

  std::vector<std::string> DecodeInto(const Parsed& schema, const std::vector<Column>& columns,
                                      const std::vector<duck::LogicalType>& types,
                                      const std::vector<std::string>& payloads,
                                      std::vector<int> indexes, Status* status) {
    std::vector<std::string> reasons;
    auto dec = MakeRowDecoder(schema, indexes, columns);
    if (status != nullptr) *status = dec.status();
    if (!dec.ok()) {
      EXPECT_NE(status, nullptr) << dec.status().ToString();
      return reasons;
    }
    auto app = duck::Appender::Open(*conn_, "t");
    EXPECT_TRUE(app.ok()) << app.status().ToString();
    auto chunk = duck::DataChunk::Create(types);
    EXPECT_TRUE(chunk.ok());
    (*dec)->Bind(*chunk, 0);
    uint64_t row = 0;
    for (const std::string& p : payloads) {
      std::string reason;
      if ((*dec)->Decode(p, row, &reason)) {
        ++row;
        reasons.emplace_back();
      } else {
        EXPECT_FALSE(reason.empty());
        reasons.push_back(reason.empty() ? "?" : reason);
      }
      if (row == duck::DataChunk::Capacity()) {
        EXPECT_TRUE((*dec)->Finish(row).ok());
        chunk->SetSize(row);
        EXPECT_TRUE(app->Append(*chunk).ok());
        chunk->Reset();
        (*dec)->Bind(*chunk, 0);
        row = 0;
      }
    }
    Status st = (*dec)->Finish(row);
    EXPECT_TRUE(st.ok()) << st.ToString();
    chunk->SetSize(row);
    st = app->Append(*chunk);
    EXPECT_TRUE(st.ok()) << st.ToString();
    st = app->Flush();
    EXPECT_TRUE(st.ok()) << st.ToString();
    return reasons;
  }

  duck::Connection& conn() { return *conn_; }

 private:
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

}  // namespace sluice::schema::protobuf::testing
