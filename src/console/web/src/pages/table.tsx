// One lake table: its schema, partition spec, sort order and properties, its snapshots
// newest first with the Kafka offsets each was written up to, compaction and expiry
// (pages/table-maintenance.tsx), the files of a snapshot, and "Query" (the SQL page with a
// first query of it).
import { useState } from "preact/hooks";
import { paths, request } from "../api";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { useResource, useTitle } from "../hooks";
import { hrefs } from "../router";
import type { Snapshot, SnapshotId, Table as TableData, TableFiles } from "../types";
import { Maintenance } from "./table-maintenance";
import { TablesOff } from "./tables";

export function Table(props: { namespace: string; name: string }) {
  useTitle(`${props.namespace}.${props.name}`);
  const table = useResource(
    () => request<TableData>("GET", paths.table(props.namespace, props.name)),
    `${props.namespace}/${props.name}`,
  );
  const t = table.data;
  // The snapshot whose files are listed: the one the user picked while the table has it,
  // else the current one (also after a compaction made another current, or an expiry
  // removed the one picked).
  const [picked, setPicked] = useState<SnapshotId | null>(null);
  const filesOf =
    picked !== null && t?.snapshots.some((s) => s.snapshot_id === picked)
      ? picked
      : (t?.current_snapshot_id ?? null);

  return (
    <section>
      <p class="crumbs">
        <Link href="/tables">Tables</Link> / {props.namespace} /
      </p>
      <div class="title-row">
        <h1>{props.name}</h1>
        <button type="button" onClick={table.reload} disabled={table.loading}>
          Refresh
        </button>
        {t && (
          <Link href={hrefs.sql(`SELECT * FROM ${t.sql_name} LIMIT 100`)} class="button primary">
            Query
          </Link>
        )}
      </div>
      {table.error?.code === "TABLES_OFF" ? (
        <TablesOff error={table.error} />
      ) : (
        <ErrorBox error={table.error}>
          {table.error?.status === 404 && (
            <>
              {" "}
              <Link href="/tables">Back to the tables</Link>
            </>
          )}
        </ErrorBox>
      )}
      <Loading when={table.loading && !t && !table.error} />
      {t && (
        <>
          <dl class="facts">
            <div>
              <dt>In SQL</dt>
              <dd>
                <code>{t.sql_name}</code>
              </dd>
            </div>
            <div>
              <dt>Format version</dt>
              <dd>{t.format_version}</dd>
            </div>
            <div>
              <dt>Current snapshot</dt>
              <dd>
                {t.current_snapshot_id === null ? "none yet" : <code>{t.current_snapshot_id}</code>}
              </dd>
            </div>
            <div>
              <dt>Location</dt>
              <dd>
                <code>{t.location}</code>
              </dd>
            </div>
            <div>
              <dt>UUID</dt>
              <dd>
                <code>{t.table_uuid}</code>
              </dd>
            </div>
          </dl>
          <Schema table={t} />
          <Partitioning table={t} />
          <Properties properties={t.properties} />
          <Snapshots
            table={t}
            filesOf={filesOf}
            onFiles={(id) => {
              setPicked(id);
              document.getElementById("files")?.scrollIntoView();
            }}
          />
          <Maintenance
            namespace={props.namespace}
            name={props.name}
            sqlName={t.sql_name}
            onChanged={() => {
              setPicked(null);
              table.reload();
            }}
          />
          <Files
            namespace={props.namespace}
            name={props.name}
            table={t}
            snapshot={filesOf}
            onSnapshot={setPicked}
          />
        </>
      )}
    </section>
  );
}

function Schema(props: { table: TableData }) {
  const s = props.table.schema;
  return (
    <section aria-labelledby="schema">
      <h2 id="schema">
        Schema <span class="tag">id {s.schema_id}</span>
      </h2>
      <table>
        <thead>
          <tr>
            <th scope="col" class="num">Id</th>
            <th scope="col">Column</th>
            <th scope="col">Type</th>
            <th scope="col">Required</th>
            <th scope="col">Doc</th>
          </tr>
        </thead>
        <tbody>
          {s.fields.map((f) => (
            <tr key={f.id}>
              <td class="num">{f.id}</td>
              <td>
                <code>{f.name}</code>
              </td>
              <td>
                <code>{f.type}</code>
              </td>
              <td>{f.required ? "required" : <span class="muted">optional</span>}</td>
              <td>{f.doc ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function Partitioning(props: { table: TableData }) {
  const spec = props.table.partition_spec;
  return (
    <section aria-labelledby="partitioning">
      <h2 id="partitioning">
        Partition spec <span class="tag">id {spec.spec_id}</span>
      </h2>
      {spec.fields.length === 0 ? (
        <p class="muted">Not partitioned.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Partition field</th>
              <th scope="col">Transform</th>
              <th scope="col">Of column</th>
              <th scope="col" class="num">Field id</th>
            </tr>
          </thead>
          <tbody>
            {spec.fields.map((f) => (
              <tr key={f.field_id}>
                <td>
                  <code>{f.name}</code>
                </td>
                <td>
                  <code>{f.transform}</code>
                </td>
                <td>
                  {f.source_name !== null && <code>{f.source_name}</code>}{" "}
                  <span class="muted">(id {f.source_id})</span>
                </td>
                <td class="num">{f.field_id}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p>
        <span class="muted">Sort order:</span> <SortOrder value={props.table.sort_order} />
      </p>
    </section>
  );
}

// Iceberg's sort order ({order_id, fields: [{transform, source_id, direction,
// null_order}]}), shown as it comes: the API gives it as the catalog keeps it.
function SortOrder(props: { value: unknown }) {
  const v = props.value as { fields?: unknown } | null | undefined;
  if (v === null || v === undefined) return <span class="muted">none</span>;
  if (Array.isArray(v.fields) && v.fields.length === 0) return <span>unsorted</span>;
  if (Array.isArray(v.fields)) {
    return (
      <>
        {v.fields.map((f, i) => (
          <span key={i}>
            {i > 0 ? ", " : ""}
            <code>{plain(f)}</code>
          </span>
        ))}
      </>
    );
  }
  return <code>{plain(v)}</code>;
}

// An object as "k=v, k=v" (a partition's values, a sort field); anything else as its
// JSON or text.
function plain(v: unknown): string {
  if (v === null || v === undefined) return "null";
  if (typeof v === "object" && !Array.isArray(v)) {
    return Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${k}=${typeof x === "object" && x !== null ? JSON.stringify(x) : x}`)
      .join(", ");
  }
  return typeof v === "string" ? v : JSON.stringify(v);
}

function Properties(props: { properties: Record<string, string> }) {
  const entries = Object.entries(props.properties).sort(([a], [b]) => fmt.compareText(a, b));
  return (
    <section aria-labelledby="properties">
      <h2 id="properties">Properties</h2>
      {entries.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            {entries.map(([k, v]) => (
              <tr key={k}>
                <td>
                  <code>{k}</code>
                </td>
                <td class="value">
                  <code>{v}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

// The summary's counts a reader looks for first; the rest are under "all".
const kSummaryFirst = [
  "added-records",
  "added-data-files",
  "deleted-records",
  "total-records",
  "total-data-files",
];

function Snapshots(props: {
  table: TableData;
  filesOf: SnapshotId | null;
  onFiles: (id: SnapshotId) => void;
}) {
  const current = props.table.current_snapshot_id;
  const snapshots = [...props.table.snapshots].sort(
    (a, b) => b.timestamp_ms - a.timestamp_ms || b.sequence_number - a.sequence_number,
  );
  return (
    <section aria-labelledby="snapshots">
      <h2 id="snapshots">Snapshots ({snapshots.length})</h2>
      {snapshots.length === 0 ? (
        <p class="muted">No snapshot yet: nothing was written to the table.</p>
      ) : (
        <table class="snapshots">
          <thead>
            <tr>
              <th scope="col">Snapshot</th>
              <th scope="col">Time</th>
              <th scope="col">Operation</th>
              <th scope="col">Summary</th>
              <th scope="col">Kafka offsets</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {snapshots.map((s) => (
              <tr key={s.snapshot_id} class={s.snapshot_id === current ? "set" : undefined}>
                <td>
                  <code>{s.snapshot_id}</code>
                  {s.snapshot_id === current && <span class="tag">current</span>}
                  <div class="muted small">
                    sequence {s.sequence_number}
                    {s.parent_id !== null && (
                      <>
                        , parent <code>{s.parent_id}</code>
                      </>
                    )}
                  </div>
                </td>
                <td class="time">{fmt.time(s.timestamp_ms)}</td>
                <td>{s.operation}</td>
                <td>
                  <Summary snapshot={s} />
                </td>
                <td>
                  {s.kafka_offsets.length === 0 ? (
                    <span class="muted">–</span>
                  ) : (
                    <ul class="plain offsets">
                      {s.kafka_offsets.map((o) => (
                        <li key={`${o.source}/${o.partition}`} title="group.topic the pipeline read">
                          {o.source} [{o.partition}]:{" "}
                          {fmt.count(o.offset)}
                        </li>
                      ))}
                    </ul>
                  )}
                </td>
                <td class="actions">
                  <button
                    type="button"
                    class="small"
                    aria-pressed={props.filesOf === s.snapshot_id}
                    aria-label={`Files of snapshot ${s.snapshot_id}`}
                    onClick={() => props.onFiles(s.snapshot_id)}
                  >
                    Files
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Summary(props: { snapshot: Snapshot }) {
  const all = Object.entries(props.snapshot.summary).sort(([a], [b]) => fmt.compareText(a, b));
  const first = kSummaryFirst.filter((k) => props.snapshot.summary[k] !== undefined);
  if (all.length === 0) return <span class="muted">–</span>;
  return (
    <>
      <ul class="plain">
        {first.map((k) => (
          <li key={k}>
            {k}: {fmt.count(Number(props.snapshot.summary[k]))}
          </li>
        ))}
      </ul>
      <details class="summary">
        <summary>all {all.length}</summary>
        <dl>
          {all.map(([k, v]) => (
            <div key={k}>
              <dt>{k}</dt>
              <dd>{v}</dd>
            </div>
          ))}
        </dl>
      </details>
    </>
  );
}

function Files(props: {
  namespace: string;
  name: string;
  table: TableData;
  snapshot: SnapshotId | null;
  onSnapshot: (id: SnapshotId) => void;
}) {
  const { snapshot } = props;
  const files = useResource(
    () =>
      snapshot === null
        ? Promise.resolve(undefined)
        : request<TableFiles>("GET", paths.tableFiles(props.namespace, props.name, snapshot)),
    snapshot ?? "",
  );
  const list = files.data?.files ?? [];
  const dataRecords = list.reduce((n, f) => n + (f.content === "data" ? f.records : 0), 0);
  const snapshots = [...props.table.snapshots].sort((a, b) => b.timestamp_ms - a.timestamp_ms);
  return (
    <section aria-labelledby="files">
      <h2 id="files" tabIndex={-1}>
        Files
      </h2>
      {snapshot === null ? (
        <p class="muted">No snapshot yet: the table has no files.</p>
      ) : (
        <>
          <div class="toolbar">
            <label class="inline">
              Of snapshot
              <select value={snapshot} onChange={(e) => props.onSnapshot(e.currentTarget.value)}>
                {snapshots.map((s) => (
                  <option key={s.snapshot_id} value={s.snapshot_id}>
                    {s.snapshot_id} · {fmt.time(s.timestamp_ms)} · {s.operation}
                    {s.snapshot_id === props.table.current_snapshot_id ? " (current)" : ""}
                  </option>
                ))}
              </select>
            </label>
            <button type="button" onClick={files.reload} disabled={files.loading}>
              Refresh
            </button>
          </div>
          <ErrorBox error={files.error} />
          <Loading when={files.loading && !files.data && !files.error} />
          {files.data && (
            <div class="scroll-x">
              <table class="files" data-testid="table-files">
                <thead>
                  <tr>
                    <th scope="col">Path</th>
                    <th scope="col">Content</th>
                    <th scope="col">Format</th>
                    <th scope="col" class="num">Records</th>
                    <th scope="col" class="num">Size</th>
                    <th scope="col">Partition</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((f) => (
                    <tr key={f.path}>
                      <td class="value">
                        <code>{f.path}</code>
                      </td>
                      <td>
                        {f.content === "data" ? "data" : <span class="warn">{f.content}</span>}
                      </td>
                      <td>{f.format}</td>
                      <td class="num">{fmt.count(f.records)}</td>
                      <td class="num">{fmt.bytes(f.size_bytes)}</td>
                      <td>
                        <code>{plain(f.partition)}</code>
                      </td>
                    </tr>
                  ))}
                  {list.length === 0 && (
                    <tr>
                      <td colSpan={6} class="muted">
                        This snapshot has no files.
                      </td>
                    </tr>
                  )}
                </tbody>
              </table>
              <p class="muted small">
                {fmt.count(list.length)} {list.length === 1 ? "file" : "files"},{" "}
                {fmt.bytes(list.reduce((n, f) => n + f.size_bytes, 0))};{" "}
                {fmt.count(dataRecords)} records in its data files.
              </p>
            </div>
          )}
        </>
      )}
    </section>
  );
}
