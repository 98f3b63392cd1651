// The data directory's cluster id and incarnation files, and the registration's clean flag.
#include "broker/cluster_identity.h"

#include <gtest/gtest.h>

#include "cluster/cluster_values.h"
#include "storage/env.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace cluster_identity_test {
namespace {

using storage::testing::TempDir;
using storage::testing::WriteFileBytes;

storage::Env* Posix() { return storage::Env::Posix(); }

void WriteMeta(const std::string& dir, const std::string& name, const std::string& text) {
  ASSERT_TRUE(Posix()->CreateDirs(dir + "/meta").ok());
  WriteFileBytes(dir + "/meta/" + name, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(ClusterIdentityTest, AnEmptyDirectoryIsANewIncarnationThatStays) {
  TempDir dir("cluster-identity");
  auto first = LoadOrCreateIncarnation(dir.path(), Posix());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->created);
  EXPECT_TRUE(cluster::IsIdText(first->id));
  auto again = LoadOrCreateIncarnation(dir.path(), Posix());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->id, first->id);

  // Wiped: a new directory is a new incarnation.
  TempDir other("cluster-identity");
  auto wiped = LoadOrCreateIncarnation(other.path(), Posix());
  ASSERT_TRUE(wiped.ok());
  EXPECT_TRUE(wiped->created);
  EXPECT_NE(wiped->id, first->id);
}

TEST(ClusterIdentityTest, AMangledIncarnationIsCorruptionNotANewOne) {
  for (const char* text : {"", "short\n", "0123456789012345678901234\n", "!!!!!!!!!!!!!!!!!!!!!!\n",
                           "AAAAAAAAAAAAAAAAAAAAAA\nmore\n"}) {
    TempDir dir("cluster-identity");
    WriteMeta(dir.path(), "incarnation", text);
    auto r = LoadOrCreateIncarnation(dir.path(), Posix());
    ASSERT_FALSE(r.ok()) << "'" << text << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
    EXPECT_NE(r.status().message().find("meta/incarnation"), std::string::npos);
  }
  TempDir huge("cluster-identity");
  WriteMeta(huge.path(), "incarnation", std::string(1 << 20, 'A'));
  EXPECT_FALSE(LoadOrCreateIncarnation(huge.path(), Posix()).ok());
}

TEST(ClusterIdentityTest, ClusterIdIsReadAsWrittenAndAbsentIsNullopt) {
  TempDir dir("cluster-identity");
  auto none = ReadClusterId(dir.path(), Posix());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteClusterId(dir.path(), "MkU3OEVBNTcwNTJENDM2Qg", Posix()).ok());
  auto read = ReadClusterId(dir.path(), Posix());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->value_or(""), "MkU3OEVBNTcwNTJENDM2Qg");

  TempDir bad("cluster-identity");
  WriteMeta(bad.path(), "cluster_id", "not/an/id\n");
  auto r = ReadClusterId(bad.path(), Posix());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST(ClusterIdentityTest, OnlyAnUncleanStopUnderIntervalIsUnclean) {
  using storage::FlushPolicy;
  EXPECT_TRUE(CleanForRegistration(true, true, FlushPolicy::kInterval));
  EXPECT_FALSE(CleanForRegistration(true, false, FlushPolicy::kInterval));
  EXPECT_TRUE(CleanForRegistration(true, false, FlushPolicy::kDurable));
  EXPECT_TRUE(CleanForRegistration(true, true, FlushPolicy::kDurable));
  // Nothing held, nothing lost.
  EXPECT_TRUE(CleanForRegistration(false, false, FlushPolicy::kInterval));
}

}  // namespace
}  // namespace cluster_identity_test
}  // namespace sluice::broker
