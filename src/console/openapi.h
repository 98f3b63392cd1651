// The OpenAPI 3.0 document of the console's /api/v1, served at /api/v1/openapi.json.
#pragma once

#include <string>

namespace sluice::console {

const std::string& OpenApiDocument();

}  // namespace sluice::console
