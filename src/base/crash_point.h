// A test hook for the crash tests: with SLUICE_TEST_CRASH_AT=POINT:N in the environment,
// the process kills itself with SIGKILL the Nth time it passes POINT. Without it, a
// string comparison on a cold path.
//
// Points: batch-begun (a batch's state written, not committed), state-committed (the
// state committed, the Kafka commit not sent), window-emitted (closed windows flushed to
// the sink, their removal not committed), sink-committed (a deferred sink's commit made,
// the Kafka commit not sent), iceberg-data-written (a commit's Parquet files written, no
// manifest yet), iceberg-list-written (manifests and manifest list written, the metadata
// version not made), iceberg-committed (the metadata version made, not yet reported).
#pragma once

#include <string_view>

namespace sluice {

void CrashPoint(std::string_view point);

}  // namespace sluice
