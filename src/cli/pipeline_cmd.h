// `sluice pipeline run|validate|invoke`: wiring of src/pipeline's runner to files, signals
// and the HTTP port (the pipelines of `sluice serve --pipelines` are src/app's PipelineSet).
#pragma once

#include <string>

namespace sluice::cli {

struct PipelineRunFlags {
  std::string file;
  std::string http_addr;  // "" or "off" = no HTTP port (as `serve --http-addr off`)
  bool progress = true;   // the progress line, when stderr is a terminal
};

int RunPipelineRun(const PipelineRunFlags& flags);
int RunPipelineValidate(const std::string& file);
int RunPipelineInvoke(const std::string& file, const std::string& fixture);

}  // namespace sluice::cli
