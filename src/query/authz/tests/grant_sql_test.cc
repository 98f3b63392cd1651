// The grant statements' grammar, and what it refuses.
#include "query/authz/grant_sql.h"

#include <gtest/gtest.h>

namespace sluice::query::authz {
namespace {

GrantStatement Parse(std::string_view sql) {
  auto r = ParseGrantStatement(sql);
  EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
  if (!r.ok() || !r->has_value()) {
    ADD_FAILURE() << sql << " was not read as a grant statement";
    return {};
  }
  return **r;
}

std::string Error(std::string_view sql) {
  auto r = ParseGrantStatement(sql);
  EXPECT_FALSE(r.ok()) << sql;
  return r.ok() ? "" : r.status().message();
}

TEST(GrantSqlTest, RolesAndMembership) {
  GrantStatement s = Parse("CREATE ROLE Analysts");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kCreateRole);
  EXPECT_EQ(s.roles, std::vector<std::string>{"analysts"});
  s = Parse("create role \"Mixed Case\";");
  EXPECT_EQ(s.roles, std::vector<std::string>{"Mixed Case"});
  s = Parse("DROP ROLE IF EXISTS a, b");
  EXPECT_TRUE(s.if_exists);
  EXPECT_EQ(s.roles.size(), 2u);
  s = Parse("GRANT analysts TO alice, \"Bob\"");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kGrantRole);
  EXPECT_EQ(s.grantees, (std::vector<std::string>{"alice", "Bob"}));
  EXPECT_EQ(GrantCommandTag(s), "GRANT ROLE");
  s = Parse("REVOKE analysts FROM alice");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kRevokeRole);
}

TEST(GrantSqlTest, Objects) {
  GrantStatement s = Parse("GRANT SELECT ON lake.sales TO analysts");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kGrant);
  EXPECT_FALSE(s.lake_kind.has_value());
  EXPECT_EQ(s.name, std::vector<std::string>{"sales"});
  EXPECT_EQ(GrantCommandTag(s), "GRANT");
  s = Parse("GRANT SELECT ON TABLE lake.Sales.\"Orders\" TO a");
  EXPECT_EQ(s.lake_kind, GrantObject::Kind::kTable);
  EXPECT_EQ(s.name, (std::vector<std::string>{"Sales", "Orders"}));
  s = Parse("GRANT SELECT ON ALL TABLES IN SCHEMA lake.a.b TO a");
  EXPECT_EQ(s.lake_kind, GrantObject::Kind::kNamespace);
  EXPECT_EQ(s.name, (std::vector<std::string>{"a", "b"}));
  s = Parse("GRANT SELECT ON \"lake.sales\".orders TO a");
  EXPECT_EQ(s.name, (std::vector<std::string>{"sales", "orders"}));
  s = Parse("GRANT SELECT ON TOPIC \"orders.v1\" TO a");
  EXPECT_EQ(s.object_kind, GrantObject::Kind::kTopic);
  EXPECT_EQ(s.name, std::vector<std::string>{"orders.v1"});
  s = Parse("GRANT SELECT ON TOPIC 'it''s' TO a");
  EXPECT_EQ(s.name, std::vector<std::string>{"it's"});
  s = Parse("GRANT READ, WRITE ON DIRECTORY '/data/x' TO a");
  EXPECT_EQ(s.object_kind, GrantObject::Kind::kDirectory);
  EXPECT_EQ(s.privileges.size(), 2u);
  s = Parse("GRANT ALL PRIVILEGES ON DIRECTORY '/d' TO a");
  EXPECT_TRUE(s.all_privileges);
  s = Parse("GRANT INSERT, CREATE ON SCHEMA lake.sales TO etl");
  EXPECT_EQ(s.privileges, (std::vector<Privilege>{Privilege::kInsert, Privilege::kCreate}));
  s = Parse("GRANT INSERT ON lake.sales.orders TO etl");  // the warehouse decides the kind
  EXPECT_FALSE(s.lake_kind.has_value());
  EXPECT_EQ(Error("GRANT CREATE ON TABLE lake.a.t TO etl").substr(0, 5), "0LP01");
  EXPECT_EQ(Error("GRANT INSERT ON TOPIC t TO etl").substr(0, 5), "0LP01");
  EXPECT_EQ(Error("GRANT CREATE ON DIRECTORY '/d' TO etl").substr(0, 5), "0LP01");
  s = Parse("REVOKE SELECT ON lake.sales FROM analysts");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kRevoke);
  s = Parse("SHOW GRANTS");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kShowGrants);
  s = Parse("show grants for Alice");
  EXPECT_EQ(s.grantees, std::vector<std::string>{"alice"});
}

TEST(GrantSqlTest, Limits) {
  GrantStatement s = Parse("ALTER ROLE alice SET max_statements = 2");
  EXPECT_EQ(s.kind, GrantStatement::Kind::kAlterLimits);
  EXPECT_EQ(s.max_statements, 2);
  s = Parse("ALTER USER alice SET memory_share TO '25%'");
  EXPECT_EQ(s.memory_percent, 25);
  s = Parse("ALTER ROLE alice RESET ALL");
  EXPECT_EQ(s.max_statements, -1);
  EXPECT_EQ(s.memory_percent, -1);
  EXPECT_EQ(Error("ALTER ROLE a SET memory_share = 0").substr(0, 5), "22023");
  EXPECT_EQ(Error("ALTER ROLE a SET memory_share = 101").substr(0, 5), "22023");
  EXPECT_EQ(Error("ALTER ROLE a SET max_statements = 0").substr(0, 5), "22023");
  EXPECT_EQ(Error("ALTER ROLE a SET max_statements = -1").substr(0, 5), "42601");
  EXPECT_EQ(Error("ALTER ROLE a SET work_mem = 1").substr(0, 5), "42704");
  EXPECT_EQ(Error("ALTER ROLE a WITH PASSWORD 'x'").substr(0, 5), "0A000");
}

TEST(GrantSqlTest, NotGrantStatements) {
  for (const char* sql : {"SELECT 1", "CREATE TABLE role (x int)", "SHOW TABLES", "",
                          "ALTER TABLE t", "DROP TABLE grants", "-- GRANT\nSELECT 1"}) {
    auto r = ParseGrantStatement(sql);
    ASSERT_TRUE(r.ok()) << sql;
    EXPECT_FALSE(r->has_value()) << sql;
  }
}

TEST(GrantSqlTest, Malformed) {
  for (const char* sql : {"GRANT",
                          "GRANT SELECT",
                          "GRANT SELECT ON",
                          "GRANT SELECT ON lake TO a",
                          "GRANT SELECT ON sales.orders TO a",
                          "GRANT SELECT ON TOPIC TO a",
                          "GRANT SELECT ON lake.x",
                          "GRANT SELECT ON lake.x TO",
                          "GRANT SELECT ON lake.x TO a b",
                          "GRANT DELETE ON lake.x TO a",
                          "GRANT READ ON lake.x TO a",
                          "GRANT SELECT ON DIRECTORY '/x' TO a",
                          "GRANT SELECT ON DIRECTORY x TO a",
                          "GRANT SELECT ON DIRECTORY '' TO a",
                          "GRANT SELECT ON TABLE lake.x TO a",
                          "GRANT SELECT ON lake.x TO PUBLIC",
                          "GRANT r TO a WITH ADMIN OPTION",
                          "GRANT SELECT ON lake.x TO a WITH GRANT OPTION",
                          "REVOKE GRANT OPTION FOR SELECT ON lake.x FROM a",
                          "CREATE ROLE",
                          "CREATE ROLE r LOGIN",
                          "DROP ROLE",
                          "DROP ROLE IF r",
                          "SHOW GRANTS FOR",
                          "SHOW GRANTS x",
                          "GRANT SELECT ON lake.'x' TO a",
                          "GRANT SELECT ON TOPIC '' TO a",
                          "GRANT SELECT ON lake.\"unterminated TO a",
                          "REVOKE r TO a",
                          "GRANT r FROM a",
                          "ALTER ROLE",
                          "ALTER ROLE a SET",
                          "ALTER ROLE a SET max_statements",
                          "ALTER ROLE a RESET"}) {
    auto r = ParseGrantStatement(sql);
    EXPECT_FALSE(r.ok()) << sql;
    if (!r.ok()) {
      EXPECT_EQ(r.status().message()[5], ':') << r.status().message();
    }
  }
}

}  // namespace
}  // namespace sluice::query::authz
