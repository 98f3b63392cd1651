// Tables: the lake's Iceberg tables (of `sluice serve --warehouse DIR` or its REST
// catalog) grouped by namespace, with their sizes, filterable by namespace and name.
import { useState } from "preact/hooks";
import { type ApiError, namespacePath, paths, request } from "../api";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { useResource, useTitle } from "../hooks";
import { hrefs } from "../router";
import type { TableSummary, Tables as TablesData } from "../types";

const kAllNamespaces = "";

export function Tables() {
  useTitle("Tables");
  const list = useResource(() => request<TablesData>("GET", paths.tables), "");
  const [filter, setFilter] = useState("");
  const [namespace, setNamespace] = useState(kAllNamespaces);
  const off = list.error?.code === "TABLES_OFF";
  const data = off ? undefined : list.data;
  const all = data?.tables ?? [];
  const namespaces = [...new Set(all.map((t) => namespacePath(t.namespace)))].sort();
  const needle = filter.trim().toLowerCase();
  const shown = all
    .filter(
      (t) =>
        (namespace === kAllNamespaces || namespacePath(t.namespace) === namespace) &&
        t.sql_name.toLowerCase().includes(needle),
    )
    .sort(
      (a, b) =>
        fmt.compareText(namespacePath(a.namespace), namespacePath(b.namespace)) ||
        fmt.compareText(a.name, b.name),
    );
  const groups = groupByNamespace(shown);

  return (
    <section>
      <div class="title-row">
        <h1>Tables</h1>
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      {off && list.error ? <TablesOff error={list.error} /> : <ErrorBox error={list.error} />}
      <Loading when={list.loading && !list.data && !list.error} />
      {data && (
        <>
          <dl class="facts">
            <div>
              <dt>Catalog</dt>
              <dd>
                <code>{data.catalog}</code>
              </dd>
            </div>
            <div>
              <dt>Tables</dt>
              <dd>{fmt.count(all.length)}</dd>
            </div>
            <div>
              <dt>Size, added up</dt>
              <dd>{fmt.bytes(all.reduce((sum, t) => sum + (t.size_bytes ?? 0), 0))}</dd>
            </div>
          </dl>
          <div class="toolbar">
            <input
              type="search"
              placeholder="Filter by name"
              aria-label="Filter tables by name"
              value={filter}
              onInput={(e) => setFilter(e.currentTarget.value)}
            />
            <label class="inline">
              Namespace
              <select value={namespace} onChange={(e) => setNamespace(e.currentTarget.value)}>
                <option value={kAllNamespaces}>all</option>
                {namespaces.map((n) => (
                  <option key={n} value={n}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
          </div>
          <table class="tables" data-testid="tables-list">
            <caption class="sr-only">Tables by namespace</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col" class="num">Records</th>
                <th scope="col" class="num">Data files</th>
                <th scope="col" class="num">Size</th>
                <th scope="col" class="num">Snapshots</th>
                <th scope="col">Last updated</th>
              </tr>
            </thead>
            {groups.map(([ns, tables]) => (
              <tbody key={ns}>
                <tr class="group">
                  <th scope="colgroup" colSpan={6}>
                    {ns === "" ? "(no namespace)" : ns}
                    <span class="tag">
                      {tables.length === 1 ? "1 table" : `${tables.length} tables`}
                    </span>
                  </th>
                </tr>
                {tables.map((t) => (
                  <tr key={t.sql_name}>
                    <td>
                      <Link href={hrefs.table(namespacePath(t.namespace), t.name)}>{t.name}</Link>
                      <div class="muted small">
                        <code>{t.sql_name}</code>
                      </div>
                    </td>
                    <td class="num">{fmt.count(t.records)}</td>
                    <td class="num">{fmt.count(t.data_files)}</td>
                    <td class="num">{fmt.bytes(t.size_bytes)}</td>
                    <td class="num">{fmt.count(t.snapshots)}</td>
                    <td>{fmt.time(t.last_updated_ms)}</td>
                  </tr>
                ))}
              </tbody>
            ))}
            {shown.length === 0 && (
              <tbody>
                <tr>
                  <td colSpan={6} class="muted" data-testid="tables-empty">
                    {all.length > 0 ? (
                      "No table matches the filter."
                    ) : (
                      <>
                        No tables in this catalog yet. A pipeline's <code>iceberg</code> sink
                        makes them (docs/sinks.md).
                      </>
                    )}
                  </td>
                </tr>
              </tbody>
            )}
          </table>
        </>
      )}
    </section>
  );
}

function groupByNamespace(tables: TableSummary[]): [string, TableSummary[]][] {
  const groups = new Map<string, TableSummary[]>();
  for (const t of tables) {
    const ns = namespacePath(t.namespace);
    const g = groups.get(ns);
    if (g) g.push(t);
    else groups.set(ns, [t]);
  }
  return [...groups];
}

// The answer of a server without a warehouse or catalog: what turns tables on.
export function TablesOff(props: { error: ApiError }) {
  return (
    <div class="notice" role="status" data-testid="tables-off">
      <p>{props.error.message || "This server has no warehouse or catalog of tables."}</p>
      <p>
        Tables are on when the server has a warehouse: start it with{" "}
        <code>sluice serve --warehouse DIR</code> (a folder, or <code>s3://bucket/prefix</code>:
        where the pipelines' <code>iceberg</code> sinks write), or set <code>catalog.uri</code>{" "}
        in its config to an Iceberg REST catalog.
      </p>
    </div>
  );
}
