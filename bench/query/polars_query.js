// `sluice bench query`'s Polars engine: one query of the benchmark over the Parquet files,
// with nodejs-polars' lazy API, in a fresh node process that the bench starts per run.
// Usage: node polars_query.js '{"query":"q1","sales":"<glob>","products":"<glob>"}'
// The thread count comes from POLARS_MAX_THREADS (set by the bench); Polars has no memory
// setting. Prints one JSON line: {"elapsed_s": <query seconds>, "columns": [...],
// "answer": ["<int>", ...]}: the checksum row, every value as the text of an integer (JS
// numbers would lose digits above 2^53). Each query is the same as the SQL of
// bench/query_bench.cc, as a data engineer writes it with Polars; the answers are compared
// with DuckDB's exactly.
"use strict";

const pl = require("nodejs-polars");

const args = JSON.parse(process.argv[2]);
// 2024-07-01T00:00:00 as microseconds since the epoch: the physical value of a Datetime(us).
const kJuly2024Us = 1719792000000000;

function cents(expr) {
  return expr.mul(100).round(0).cast(pl.Int64);
}

// Each builds a LazyFrame of one row whose columns are the checksum, in the SQL's order.
// Derived columns (cents) are computed before a group-by, not inside its aggregations:
// Polars evaluates a compound expression in an aggregation group by group, which made q2
// and q4 about twice as slow; computing it first is the form Polars' guide recommends.
const queries = {
  // q1: a filter.
  q1: (sales) =>
    sales
      .filter(
        pl.col("ts").cast(pl.Int64).gtEq(kJuly2024Us)
          .and(pl.col("channel").eq(pl.lit("web")))
          .and(pl.col("amount").gtEq(100)),
      )
      .select(
        pl.len().cast(pl.Int64).alias("rows"),
        pl.col("quantity").cast(pl.Int64).sum().alias("quantity"),
        cents(pl.col("amount")).sum().alias("cents"),
        pl.col("order_id").sum().alias("order_ids"),
      ),
  // q2: sales joined with products, grouped by category.
  q2: (sales, products) =>
    sales
      .join(products.select("product_id", "category", "list_price"), { on: "product_id", how: "inner" })
      .withColumns(
        pl.col("quantity").cast(pl.Int64).alias("quantity"),
        cents(pl.col("amount")).alias("cents"),
        cents(pl.col("list_price")).mul(pl.col("quantity").cast(pl.Int64)).alias("list_cents"),
      )
      .groupBy("category")
      .agg(
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("quantity").sum().alias("q"),
        pl.col("cents").sum().alias("cents"),
        pl.col("list_cents").sum().alias("list_cents"),
      )
      .select(
        pl.len().cast(pl.Int64).alias("groups"),
        pl.col("n").sum().alias("rows"),
        pl.col("q").sum().alias("quantity"),
        pl.col("cents").sum().alias("cents"),
        pl.col("list_cents").sum().alias("list_cents"),
        pl.col("n").mul(pl.col("n")).sum().alias("n_squared"),
      ),
  // q3: the latest row per customer (newest ts, then highest order_id): sorted, then the
  // first row of each customer.
  q3: (sales) =>
    sales
      .sort(["ts", "order_id"], true)
      .unique({ subset: ["customer_id"], keep: "first" })
      .select(
        pl.len().cast(pl.Int64).alias("customers"),
        pl.col("order_id").sum().alias("order_ids"),
        pl.col("quantity").cast(pl.Int64).sum().alias("quantity"),
        cents(pl.col("amount")).sum().alias("cents"),
      ),
  // q4: a group-by with one group per customer.
  q4: (sales) =>
    sales
      .withColumns(pl.col("quantity").cast(pl.Int64).alias("quantity"), cents(pl.col("amount")).alias("cents"))
      .groupBy("customer_id")
      .agg(
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("quantity").sum().alias("q"),
        pl.col("cents").sum().alias("cents"),
        pl.col("ts").max().alias("last_ts"),
      )
      .select(
        pl.len().cast(pl.Int64).alias("groups"),
        pl.col("n").sum().alias("rows"),
        pl.col("q").sum().alias("quantity"),
        pl.col("cents").sum().alias("cents"),
        pl.col("n").mul(pl.col("n")).sum().alias("n_squared"),
        pl.col("last_ts").cast(pl.Int64).div(1000000).cast(pl.Int64).sum().alias("last_ts_seconds"),
      ),
};

async function main() {
  const build = queries[args.query];
  if (build === undefined) throw new Error(`unknown query ${args.query}`);
  const start = process.hrtime.bigint();
  const sales = pl.scanParquet(args.sales);
  const products = pl.scanParquet(args.products);
  const df = await build(sales, products).collect();
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const text = df.select(pl.all().cast(pl.Utf8));
  const row = text.row(0);
  process.stdout.write(JSON.stringify({ elapsed_s: elapsed, columns: text.columns, answer: row }) + "\n");
}

main().catch((e) => {
  process.stderr.write(`polars: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
