// ParseBytes: a byte count as people write it ("1048576", "512KiB", "1 MiB", "2GB"), the
// units of Config::GetBytes (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB; any case). The error
// says what is wrong with the text ("has an unknown unit 'x' (want ...)").
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace sluice {

Result<int64_t> ParseBytes(std::string_view text);

}  // namespace sluice
