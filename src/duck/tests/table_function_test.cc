// TableFunction: a C++ table function registered on a connection, with positional and
// named parameters, projection pushdown, several chunks, and errors from each callback.
#include "duck/table_function.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace sluice::duck {
namespace {

// numbers(n, step => s, label => 'x', tags => [..], at => ts): rows i = 0..n-1 with
// columns i BIGINT, label VARCHAR; `n` < 0 fails at bind, a NULL step at init, n = 13 in scan.
class Numbers : public TableFunction {
 public:
  struct Bound : BindData {
    int64_t n = 0, step = 1;
    std::string label;
  };
  struct State : ScanState {
    std::vector<uint64_t> columns;
    int64_t next = 0;
  };

  Result<std::unique_ptr<BindData>> Bind(TableBind& bind) const override {
    auto data = std::make_unique<Bound>();
    std::optional<std::string> n = bind.TextParameter(0);
    if (!n) return InvalidArgumentError("numbers(): n is NULL");
    data->n = std::stoll(*n);
    if (data->n < 0) return InvalidArgumentError("numbers(): n {} is negative", data->n);
    data->step = bind.NamedInt64("step").value_or(1);
    std::optional<std::vector<int64_t>> tags = bind.NamedInt64List("tags");
    std::optional<int64_t> at = bind.NamedTimestampTz("at");
    data->label = bind.NamedText("label").value_or("") +
                  (tags ? std::to_string(tags->size()) : "") + (at ? std::to_string(*at) : "");
    bind.AddResultColumn("i", LogicalType::BigInt());
    bind.AddResultColumn("label", LogicalType::Varchar());
    bind.SetCardinality(static_cast<uint64_t>(data->n), true);
    return std::unique_ptr<BindData>(std::move(data));
  }

  Result<std::unique_ptr<ScanState>> Init(const BindData& data, TableInit& init) const override {
    if (static_cast<const Bound&>(data).step == 0) return InvalidArgumentError("numbers(): step 0");
    auto state = std::make_unique<State>();
    state->columns = init.ProjectedColumns();
    init.SetMaxThreads(1);
    return std::unique_ptr<ScanState>(std::move(state));
  }

  Status Scan(const BindData& data, ScanState& state, TableOutput& out) const override {
    const auto& d = static_cast<const Bound&>(data);
    auto& s = static_cast<State&>(state);
    uint64_t rows = 0;
    for (; rows < TableOutput::Capacity() && s.next < d.n; ++rows, ++s.next) {
      if (s.next == 13 && d.label == "fail")
        return InternalError("numbers(): {} is unlucky", s.next);
      for (size_t c = 0; c < s.columns.size(); ++c) {
        Vector v = out.column(c);
        if (s.columns[c] == 0) {
          v.data<int64_t>()[rows] = s.next * d.step;
        } else if (d.label.empty()) {
          v.SetNull(rows);
        } else {
          v.AssignString(rows, d.label);
        }
      }
    }
    out.SetSize(rows);
    return Status::OK();
  }
};

class TableFunctionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
    TableFunctionSignature sig{.name = "numbers", .projection_pushdown = true};
    sig.parameters.push_back(LogicalType::Varchar());
    sig.named_parameters.emplace_back("step", LogicalType::BigInt());
    sig.named_parameters.emplace_back("label", LogicalType::Varchar());
    sig.named_parameters.emplace_back("tags", LogicalType::List(LogicalType::BigInt()));
    sig.named_parameters.emplace_back("at", LogicalType::TimestampTz());
    ASSERT_TRUE(RegisterTableFunction(*conn_, sig, std::make_unique<Numbers>()).ok());
  }

  std::string One(const std::string& sql) {
    auto r = conn_->QueryText(sql);
    if (!r.ok()) return "error: " + r.status().message();
    if (r->size() != 1 || (*r)[0].size() != 1) return "<not one value>";
    return (*r)[0][0].value_or("NULL");
  }

  std::unique_ptr<Database> db_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(TableFunctionTest, RowsOverSeveralChunks) {
  EXPECT_EQ(One("SELECT sum(i) FROM numbers('5000', step => 2)"), "24995000");
  EXPECT_EQ(One("SELECT count(*) FROM numbers('0')"), "0");
  EXPECT_EQ(One("SELECT count(label) FROM numbers('3')"), "0");
}

TEST_F(TableFunctionTest, NamedParametersAndProjection) {
  EXPECT_EQ(One("SELECT label FROM numbers('1', label => 'x')"), "x");
  EXPECT_EQ(One("SELECT label FROM numbers('1', label => 'x', tags => [1, NULL, 3])"), "x2");
  EXPECT_EQ(One("SELECT label FROM numbers('1', label => 'x', at => TIMESTAMPTZ '1970-01-01 "
                "00:00:01+00')"),
            "x1000000");
  EXPECT_EQ(One("SELECT max(i) FROM numbers('3', step => NULL)"), "2");
}

TEST_F(TableFunctionTest, ErrorsOfEachCallbackFailTheQuery) {
  EXPECT_NE(One("SELECT * FROM numbers(NULL)").find("numbers(): n is NULL"), std::string::npos);
  EXPECT_NE(One("SELECT * FROM numbers('-1')").find("numbers(): n -1 is negative"),
            std::string::npos);
  EXPECT_NE(One("SELECT * FROM numbers('1', step => 0)").find("step 0"), std::string::npos);
  EXPECT_NE(One("SELECT count(*) FROM numbers('20', label => 'fail')").find("13 is unlucky"),
            std::string::npos);
  EXPECT_NE(One("SELECT * FROM numbers('x')").find("error: "), std::string::npos);  // stoll throws
}

}  // namespace
}  // namespace sluice::duck
