// InProcessSource::Create's checks of the pipeline's settings, which hold before any broker
// is asked (the source itself runs against a real broker in
// tests/integration/in_process_pipeline_test.py).
#include "pipeline/in_process_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice::pipeline {
namespace {

using ::testing::HasSubstr;

std::string CreateError(std::map<std::string, std::string> properties) {
  KafkaSourceConfig c;
  c.topics = {"events"};
  c.group_id = "g";
  c.properties = std::move(properties);
  auto s = InProcessSource::Create(c, "p", SourceCounters{}, {});
  return s.ok() ? "" : s.status().message();
}

TEST(InProcessSourceTest, SettingsAreCheckedBeforeTheBroker) {
  EXPECT_THAT(CreateError({{"heartbeat.interval.ms", "0"}}),
              HasSubstr("heartbeat.interval.ms: '0' is not a positive whole number"));
  EXPECT_THAT(CreateError({{"session.timeout.ms", "-5"}}), HasSubstr("session.timeout.ms"));
  EXPECT_THAT(CreateError({{"max.poll.interval.ms", "300s"}}), HasSubstr("max.poll.interval.ms"));
  EXPECT_THAT(CreateError({{"partition.assignment.strategy", "range,sticky"}}),
              HasSubstr("the in-process source offers range, roundrobin and cooperative-sticky"));
  EXPECT_THAT(
      CreateError({{"partition.assignment.strategy", "cooperative-sticky,range"}}),
      HasSubstr("eager assignors (range, roundrobin) and cooperative-sticky cannot be mixed"));
  // Valid settings get as far as the broker, which is missing here.
  EXPECT_THAT(CreateError({{"heartbeat.interval.ms", "1000"},
                           {"partition.assignment.strategy", "roundrobin, range"}}),
              HasSubstr("cannot serve in-process reads"));
  EXPECT_THAT(CreateError({{"partition.assignment.strategy", "cooperative-sticky"}}),
              HasSubstr("cannot serve in-process reads"));
}

}  // namespace
}  // namespace sluice::pipeline
