// `sluice bench query --small-statements`: what one small statement costs, as drivers and
// BI tools send them by the thousand (issue 29): `--clients` libpq sessions each sending
// statements back to back with the simple query protocol for `--statement-seconds`, as
// pgbench does, over `SELECT 1`, the catalog query psql sends first for `\d products`, and
// a point lookup on the lake table `lake.bench.products` (a random key per statement). The
// reference is a PostgreSQL the bench starts in the same run when one is installed (Debian's
// `postgresql`), with the same products in a table keyed by product_id, asked the same way.
#pragma once

#include <string>

#include "bench/query_bench.h"
#include "bench/query_engine.h"

namespace sluice::bench {

// The target of issue 29: statements a second from 16 clients on the small machine.
inline constexpr double kSmallStatementsTarget = 10'000;

// Runs it over `data` (its products table) with `binary` as the server, working in `work`;
// the table (or JSON lines) on stdout, progress on stderr. Returns 0, or 1 with the reason
// on stderr.
int RunSmallStatementsBench(const QueryBenchOptions& options, const QueryDataset& data,
                            const std::string& work, const std::string& binary);

}  // namespace sluice::bench
