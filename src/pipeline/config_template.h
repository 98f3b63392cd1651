// Step 1 of reading a pipeline file: `{{ NAME }}` and `{{ NAME|default('value') }}`
// substituted from the environment (pipeline_config.h), keeping track of where each
// rendered line came from so that later errors name the source line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "pipeline/pipeline_config.h"

namespace sluice::pipeline::config_internal {

// The rendered text, and for each of its lines the source line it came from (lines
// inserted by a multi-line value, or removed with a comment, keep error lines right).
struct Rendered {
  std::string text;
  std::vector<int> source_line;  // [rendered line, 0-based] -> source line, 1-based
};

// `text` (from `origin`) with every expression substituted; errors name origin:line.
Result<Rendered> Render(std::string_view text, std::string_view origin, const EnvLookup& env);

}  // namespace sluice::pipeline::config_internal
