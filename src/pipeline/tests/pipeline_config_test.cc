#include "pipeline/pipeline_config.h"
#include <gtest/gtest.h>
TEST(PipelineConfigTest, Placeholder) {}
