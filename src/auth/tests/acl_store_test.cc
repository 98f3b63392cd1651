// The ACL store: creations checked one by one and added in one persisted change, deletions
// by filter returning what they matched, failed persists changing nothing, snapshots that
// readers keep while the store moves on, and the JSON loaded back.
#include "auth/acl_store.h"

#include <gtest/gtest.h>

namespace sluice::auth {
namespace {

AclBinding Topic(std::string name, std::string principal, AclOperation op,
                 AclPermission p = AclPermission::kAllow) {
  return {ResourceType::kTopic,
          std::move(name),
          PatternType::kLiteral,
          std::move(principal),
          "*",
          op,
          p};
}

TEST(AclStoreTest, CreateDeleteAndPersist) {
  std::vector<std::string> written;
  bool fail = false;
  auto store = AclStore::Load("", [&](const std::string& j) {
    if (fail) return IOError("disk full");
    written.push_back(j);
    return Status::OK();
  });
  ASSERT_TRUE(store.ok());
  AclStore& s = **store;
  AclBinding bad = Topic("t", "nocolon", AclOperation::kRead);
  std::vector<Status> created = s.Create({Topic("orders", "User:alice", AclOperation::kRead), bad,
                                          Topic("orders", "User:bob", AclOperation::kWrite)});
  ASSERT_EQ(created.size(), 3u);
  EXPECT_TRUE(created[0].ok());
  EXPECT_NE(created[1].message().find("Could not parse principal"), std::string::npos);
  EXPECT_TRUE(created[2].ok());
  EXPECT_EQ(written.size(), 1u);
  std::shared_ptr<const AclSet> before = s.Current();
  EXPECT_EQ(before->bindings().size(), 2u);
  EXPECT_TRUE(before->Authorize(
      {"User:alice", "h", ResourceType::kTopic, "orders", AclOperation::kRead}, false));

  // A failed persist: nothing changes, every valid creation says why.
  fail = true;
  created = s.Create({Topic("x", "User:c", AclOperation::kRead)});
  EXPECT_EQ(created[0].message(), "disk full");
  EXPECT_EQ(s.Current()->bindings().size(), 2u);
  fail = false;

  AclFilter by_bob;
  by_bob.principal = "User:bob";
  AclFilter invalid;
  invalid.operation = AclOperation::kUnknown;
  auto deleted = s.Delete({by_bob, invalid, by_bob});
  ASSERT_EQ(deleted.size(), 3u);
  ASSERT_TRUE(deleted[0].status.ok());
  ASSERT_EQ(deleted[0].bindings.size(), 1u);
  EXPECT_EQ(deleted[0].bindings[0].principal, "User:bob");
  EXPECT_FALSE(deleted[1].status.ok());
  EXPECT_EQ(deleted[2].bindings.size(), 1u);  // a binding matched twice is reported twice
  EXPECT_EQ(s.Current()->bindings().size(), 1u);
  // The snapshot taken before still answers as it did.
  EXPECT_EQ(before->bindings().size(), 2u);

  auto loaded = AclStore::Load(written.back(), nullptr);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->Current()->bindings(), s.Current()->bindings());
  ASSERT_TRUE((*loaded)->Replace("").ok());
  EXPECT_TRUE((*loaded)->Current()->bindings().empty());
  EXPECT_FALSE((*loaded)->Replace("{").ok());
}

}  // namespace
}  // namespace sluice::auth
