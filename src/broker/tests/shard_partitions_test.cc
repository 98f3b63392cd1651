// ShardPartitions: the name-ordered map and the (topic id, number) index stay in step
// through emplace, Extract and clear; a topic made again under its name (a new id) is
// another partition to the index.
#include <gtest/gtest.h>

#include <memory>

#include "broker/shards.h"

namespace sluice::broker {
namespace shard_partitions_test {
namespace {

std::unique_ptr<Partition> Part(uint64_t id) {
  auto p = std::make_unique<Partition>();
  p->topic_id = kafka::Uuid{id, id + 1};
  return p;
}

TEST(ShardPartitionsTest, TheIdIndexFollowsTheMap) {
  ShardPartitions parts;
  const kafka::Uuid a{1, 2}, b{7, 8};
  for (int32_t p = 0; p < 1000; ++p) ASSERT_TRUE(parts.emplace({"a", p}, Part(1)).second);
  Partition* b0 = parts.emplace({"b", 0}, Part(7)).first->second.get();
  EXPECT_EQ(parts.size(), 1001u);
  // A second emplace of a key keeps the first partition, in the map and the index.
  EXPECT_FALSE(parts.emplace({"b", 0}, Part(7)).second);
  EXPECT_EQ(parts.FindById(b, 0), b0);
  EXPECT_EQ(parts.FindById(a, 999), parts.find({"a", 999})->second.get());
  EXPECT_EQ(parts.FindById(a, 1000), nullptr);
  EXPECT_EQ(parts.FindById(b, 1), nullptr);
  EXPECT_EQ(parts.FindById(kafka::Uuid{1, 3}, 0), nullptr);  // another id, same numbers

  std::unique_ptr<Partition> taken = parts.Extract(parts.find({"b", 0}));
  EXPECT_EQ(taken.get(), b0);
  EXPECT_EQ(parts.FindById(b, 0), nullptr);
  EXPECT_EQ(parts.find({"b", 0}), parts.end());
  // "b" made again: a new id under the old name.
  Partition* again = parts.emplace({"b", 0}, Part(9)).first->second.get();
  EXPECT_EQ(parts.FindById(b, 0), nullptr);
  EXPECT_EQ(parts.FindById(kafka::Uuid{9, 10}, 0), again);

  parts.clear();
  EXPECT_TRUE(parts.empty());
  EXPECT_EQ(parts.FindById(a, 0), nullptr);
}

}  // namespace
}  // namespace shard_partitions_test
}  // namespace sluice::broker
