// The pipeline's names for the JSON decoders, which live in src/json (json/json_decoder.h)
// so that topic() shares them: the runner decodes with StructuredDecoder and
// InferredDecoder and reports DecodeErrors.
#pragma once

#include "json/json_decoder.h"

namespace sluice::pipeline {

using json::DecodeError;
using json::InferredDecoder;
using json::InferredOptions;
using json::StructuredDecoder;
using json::StructuredOptions;

}  // namespace sluice::pipeline
