// GrantSet and GrantStore: the checks, role closure, persistence and malformed documents.
#include "query/authz/grants.h"

#include <gtest/gtest.h>

namespace sluice::query::authz {
namespace {

Grant Select(std::string grantee, GrantObject::Kind kind, std::vector<std::string> name) {
  return {std::move(grantee), Privilege::kSelect, {kind, std::move(name)}};
}

TEST(GrantSetTest, TablesNamespacesAndRoles) {
  GrantSet s;
  ASSERT_TRUE(s.CreateRole("analysts").ok());
  EXPECT_FALSE(s.CreateRole("analysts").ok());
  ASSERT_TRUE(s.GrantRole("analysts", "alice").ok());
  s.AddGrant(Select("analysts", GrantObject::Kind::kNamespace, {"sales"}));
  s.AddGrant(Select("bob", GrantObject::Kind::kTable, {"hr", "people"}));

  EXPECT_TRUE(s.CanSelectTable("alice", {"sales"}, "orders"));
  EXPECT_TRUE(s.CanSelectTable("alice", {"sales", "eu"}, "orders"));  // under the namespace
  EXPECT_FALSE(s.CanSelectTable("alice", {"salesx"}, "orders"));
  EXPECT_FALSE(s.CanSelectTable("alice", {"hr"}, "people"));
  EXPECT_TRUE(s.CanSelectTable("bob", {"hr"}, "people"));
  EXPECT_FALSE(s.CanSelectTable("bob", {"hr"}, "salaries"));
  EXPECT_FALSE(s.CanSelectTable("carol", {"sales"}, "orders"));
  EXPECT_TRUE(s.CanSeeNamespace("bob", {"hr"}));
  EXPECT_FALSE(s.CanSeeNamespace("bob", {"sales"}));
  EXPECT_TRUE(s.CanSeeNamespace("alice", {"sales", "eu"}));

  // A role's grants go with the role.
  ASSERT_TRUE(s.DropRole("analysts", false).ok());
  EXPECT_FALSE(s.CanSelectTable("alice", {"sales"}, "orders"));
  EXPECT_TRUE(s.grants().size() == 1);
  EXPECT_FALSE(s.DropRole("analysts", false).ok());
  EXPECT_TRUE(s.DropRole("analysts", true).ok());
}

TEST(GrantSetTest, RolesOfRolesAndCycles) {
  GrantSet s;
  ASSERT_TRUE(s.CreateRole("a").ok());
  ASSERT_TRUE(s.CreateRole("b").ok());
  ASSERT_TRUE(s.GrantRole("a", "b").ok());
  ASSERT_TRUE(s.GrantRole("b", "alice").ok());
  s.AddGrant(Select("a", GrantObject::Kind::kTopic, {"orders"}));
  EXPECT_TRUE(s.CanSelectTopic("alice", "orders"));
  EXPECT_FALSE(s.CanSelectTopic("alice", "orders2"));
  Status cycle = s.GrantRole("b", "a");
  EXPECT_FALSE(cycle.ok());
  EXPECT_EQ(cycle.message().substr(0, 5), "0LP01");
  EXPECT_FALSE(s.GrantRole("a", "a").ok());
  EXPECT_FALSE(s.GrantRole("nope", "alice").ok());
}

TEST(GrantSetTest, DirectoriesCoverWhatIsUnderThem) {
  GrantSet s;
  s.AddGrant({"alice", Privilege::kRead, {GrantObject::Kind::kDirectory, {"/data/a"}}});
  EXPECT_TRUE(s.CanAccessPath("alice", "/data/a", Privilege::kRead));
  EXPECT_TRUE(s.CanAccessPath("alice", "/data/a/x/y.parquet", Privilege::kRead));
  EXPECT_FALSE(s.CanAccessPath("alice", "/data/ab", Privilege::kRead));
  EXPECT_FALSE(s.CanAccessPath("alice", "/data", Privilege::kRead));
  EXPECT_FALSE(s.CanAccessPath("alice", "/data/a/x", Privilege::kWrite));
  s.AddGrant({"bob", Privilege::kRead, {GrantObject::Kind::kDirectory, {"/"}}});
  EXPECT_TRUE(s.CanAccessPath("bob", "/etc/passwd", Privilege::kRead));
}

TEST(GrantSetTest, InsertAndCreate) {
  GrantSet s;
  s.AddGrant({"etl", Privilege::kInsert, {GrantObject::Kind::kNamespace, {"sales"}}});
  s.AddGrant({"etl", Privilege::kCreate, {GrantObject::Kind::kNamespace, {"sales", "eu"}}});
  EXPECT_TRUE(s.CanOnTable("etl", {"sales"}, "orders", Privilege::kInsert));
  EXPECT_FALSE(s.CanSelectTable("etl", {"sales"}, "orders"));  // INSERT is not SELECT
  EXPECT_TRUE(s.CanCreateIn("etl", {"sales", "eu"}));
  EXPECT_TRUE(s.CanCreateIn("etl", {"sales", "eu", "de"}));
  EXPECT_FALSE(s.CanCreateIn("etl", {"sales"}));
  EXPECT_FALSE(s.CanCreateIn("etl", {}));  // the root is the superusers'
  EXPECT_TRUE(s.CanSeeNamespace("etl", {"sales"}));
  EXPECT_TRUE(PrivilegeApplies(Privilege::kCreate, GrantObject::Kind::kNamespace));
  EXPECT_FALSE(PrivilegeApplies(Privilege::kCreate, GrantObject::Kind::kTable));
  EXPECT_FALSE(PrivilegeApplies(Privilege::kRead, GrantObject::Kind::kTopic));
}

TEST(GrantSetTest, LimitsTakeTheLowest) {
  GrantSet s;
  ASSERT_TRUE(s.CreateRole("r").ok());
  ASSERT_TRUE(s.GrantRole("r", "alice").ok());
  s.SetLimits("r", {.max_statements = 2, .memory_percent = 50});
  s.SetLimits("alice", {.max_statements = 3, .memory_percent = 0});
  UserLimits l = s.LimitsOf("alice");
  EXPECT_EQ(l.max_statements, 2);
  EXPECT_EQ(l.memory_percent, 50);
  EXPECT_EQ(s.LimitsOf("bob").max_statements, 0);
}

TEST(GrantSetTest, JsonRoundTripAndMalformedDocuments) {
  GrantSet s;
  ASSERT_TRUE(s.CreateRole("r").ok());
  ASSERT_TRUE(s.GrantRole("r", "alice").ok());
  s.AddGrant(Select("r", GrantObject::Kind::kTable, {"a", "b", "t"}));
  s.AddGrant({"alice", Privilege::kWrite, {GrantObject::Kind::kDirectory, {"/x"}}});
  s.SetLimits("alice", {.max_statements = 1, .memory_percent = 10});
  auto back = GrantSet::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), s.ToJson());
  EXPECT_TRUE(back->CanSelectTable("alice", {"a", "b"}, "t"));

  EXPECT_TRUE(GrantSet::FromJson("").ok());
  EXPECT_TRUE(GrantSet::FromJson("  \n").ok());
  for (const char* bad :
       {"[", "[]", "{\"roles\": 3}", "{\"roles\": [1]}", "{\"members\": {\"a\": [\"nope\"]}}",
        "{\"grants\": [{\"grantee\": \"a\"}]}",
        "{\"grants\": [{\"grantee\": \"a\", \"privilege\": \"DROP\", \"type\": \"table\", "
        "\"name\": [\"x\"]}]}",
        "{\"grants\": [{\"grantee\": \"a\", \"privilege\": \"SELECT\", \"type\": \"view\", "
        "\"name\": [\"x\"]}]}",
        "{\"grants\": [{\"grantee\": \"\", \"privilege\": \"SELECT\", \"type\": \"table\", "
        "\"name\": [\"x\"]}]}",
        "{\"grants\": [{\"grantee\": \"a\", \"privilege\": \"SELECT\", \"type\": \"table\", "
        "\"name\": []}]}",
        "{\"limits\": {\"a\": {\"memory_percent\": 101}}}",
        "{\"limits\": {\"a\": {\"max_statements\": \"x\"}}}"}) {
    EXPECT_FALSE(GrantSet::FromJson(bad).ok()) << bad;
  }
}

TEST(GrantStoreTest, ChangesArePersistedBeforeTheyShow) {
  std::string persisted;
  bool fail = false;
  auto store = GrantStore::Load("", [&](const std::string& json) {
    if (fail) return IOError("disk full");
    persisted = json;
    return Status::OK();
  });
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Apply([](GrantSet& s) { return s.CreateRole("r"); }).ok());
  EXPECT_TRUE((*store)->Current()->IsRole("r"));
  EXPECT_NE(persisted.find("\"r\""), std::string::npos);
  const uint64_t v = (*store)->version();
  fail = true;
  EXPECT_FALSE((*store)->Apply([](GrantSet& s) { return s.CreateRole("q"); }).ok());
  EXPECT_FALSE((*store)->Current()->IsRole("q"));
  EXPECT_EQ((*store)->version(), v);
  // A failing change leaves the set as it was.
  fail = false;
  EXPECT_FALSE((*store)->Apply([](GrantSet& s) { return s.CreateRole("r"); }).ok());
  ASSERT_TRUE((*store)->Replace("{\"roles\": [\"z\"]}").ok());
  EXPECT_TRUE((*store)->Current()->IsRole("z"));
  EXPECT_FALSE((*store)->Current()->IsRole("r"));
  EXPECT_FALSE((*store)->Replace("{").ok());
  EXPECT_TRUE((*store)->Current()->IsRole("z"));
}

TEST(NormalizePathTest, AbsoluteAndNormal) {
  EXPECT_EQ(NormalizePath("/a/b/../c/"), "/a/c");
  EXPECT_EQ(NormalizePath("/a/./b//c"), "/a/b/c");
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("/a/b/../../.."), "/");
  EXPECT_EQ(NormalizePath("rel")[0], '/');
}

}  // namespace
}  // namespace sluice::query::authz
