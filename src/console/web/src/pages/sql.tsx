// The SQL page: an editor (CodeMirror, loaded on this page only) completing the query
// server's relations and columns, Run (Ctrl/Cmd+Enter) streaming the answer into a grid
// that shows a million rows without slowing, each statement's tag and count, an error
// with its place underlined in the editor, Cancel, downloads as CSV or Parquet, a chart of
// the result, and EXPLAIN's plan as text (docs/design/0026-console.md #12).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, paths, request, send } from "../api";
import { ResultChart, chartPlan, type ChartKind } from "../components/result-chart";
import { ResultGrid } from "../components/result-grid";
import { SqlBox, type SqlEditor } from "../components/sql-box";
import { ErrorBox } from "../components/ui";
import * as fmt from "../format";
import { useAction, useResource, useTitle } from "../hooks";
import { navigate } from "../router";
import { useSqlRun, type ResultSet, type Run } from "../sql-run";
import type { SqlRelation, SqlSchema } from "../types";

const kStoreKey = "sluice.sql";
const kFirstQuery = "SELECT 42 AS answer";
const kMaxRows = 1_000_000;
const kNoRelations: SqlRelation[] = [];

// The text the editor starts with: a link's (?sql=, the table page's Query), else the
// text of this tab's last visit (a reload keeps it), else a first query.
function initialSql(): string {
  const linked = new URLSearchParams(location.search).get("sql");
  if (linked !== null) return linked;
  try {
    return sessionStorage.getItem(kStoreKey) ?? kFirstQuery;
  } catch {
    return kFirstQuery;  // storage refused (a privacy setting)
  }
}

function keep(sql: string): void {
  try {
    sessionStorage.setItem(kStoreKey, sql);
  } catch {
    // Not kept across a reload, but the page works on.
  }
}

export function Sql() {
  useTitle("SQL");
  const [initial] = useState(initialSql);
  const editor = useRef<SqlEditor | null>(null);
  const current = () => editor.current?.text() ?? initial;
  const schema = useResource(() => request<SqlSchema>("GET", paths.sqlSchema), "");
  const relations = schema.data?.relations ?? kNoRelations;
  const { run, start, cancel } = useSqlRun();
  const [maxRows, setMaxRows] = useState("");
  const [limitError, setLimitError] = useState<ApiError | undefined>(undefined);
  const busy = run.phase === "running" || run.phase === "cancelling";

  // A link's query becomes this tab's text, and the address loses it: a reload then keeps
  // the user's edits rather than the link's query.
  useEffect(() => {
    if (new URLSearchParams(location.search).has("sql")) {
      keep(initial);
      navigate("/sql", true);
    }
  }, []);

  // The limit typed, or null for the server's default; undefined when it is no limit.
  const limit = (): number | null | undefined => {
    const text = maxRows.trim();
    const n = Number(text);
    if (text === "") return null;
    if (Number.isInteger(n) && n >= 1 && n <= kMaxRows) return n;
    const range = `from 1 to ${fmt.count(kMaxRows)}`;
    setLimitError(new ApiError(0, "INVALID_REQUEST", `the row limit is a whole number ${range}`));
    return undefined;
  };

  const runIt = () => {
    if (busy) return;
    setLimitError(undefined);
    const n = limit();
    if (n === undefined) return;
    editor.current?.markError(null);
    void start(current(), n);
  };

  // The error's place, underlined in the editor when the answer says where.
  const sqlError = run.error && "sql" in run.error ? run.error.sql : null;
  useEffect(() => {
    if (sqlError?.position !== undefined) {
      const { position, message } = sqlError;
      editor.current?.markError({ sent: run.sent, position, message });
    }
  }, [sqlError]);

  return (
    <section class="sql-page">
      <h1>SQL</h1>
      <SchemaStatus error={schema.error} />
      <SqlBox
        initial={initial}
        relations={relations}
        onChange={keep}
        onRun={runIt}
        onReady={(ed) => {
          editor.current = ed;
        }}
      />
      <p class="muted small keys">
        Ctrl+Enter (⌘+Enter): Run · Ctrl+Space: complete a name · Tab indents; Esc then Tab
        leaves the editor
      </p>
      <div class="buttons">
        <button type="button" class="primary" disabled={busy} onClick={runIt}>
          {busy ? "Running…" : "Run"}
        </button>
        {busy && (
          <button type="button" disabled={run.phase === "cancelling"} onClick={() => void cancel()}>
            {run.phase === "cancelling" ? "Cancelling…" : "Cancel"}
          </button>
        )}
        <label class="inline">
          Row limit
          <input
            type="number"
            class="max-rows"
            min={1}
            max={kMaxRows}
            placeholder="100000"
            value={maxRows}
            onInput={(e) => setMaxRows(e.currentTarget.value)}
          />
        </label>
        <Downloads sql={current} limit={limit} />
      </div>
      <ErrorBox error={limitError} />
      <RunStatus run={run} />
      <RunErrorView run={run} />
      {run.result && (
        <Result key={run.result.id} result={run.result} count={run.result.rows.length} />
      )}
    </section>
  );
}

// Why names do not complete, when the schema could not be read.
function SchemaStatus(props: { error: ApiError | undefined }) {
  const e = props.error;
  if (!e) return null;
  if (e.code === "SQL_OFF" || e.code === "SQL_NEEDS_LOGIN") {
    return (
      <div class="notice" role="status">
        <p>{e.message || e.code}</p>
        <SqlOffHint code={e.code} />
      </div>
    );
  }
  return (
    <p class="muted small">
      Names are not completed: {e.code}
      {e.message ? ` (${e.message})` : ""}.
    </p>
  );
}

function SqlOffHint(props: { code: string }) {
  if (props.code === "SQL_OFF") {
    return (
      <p>
        This server runs no query server (<code>--pg-addr off</code>, or{" "}
        <code>query.pg_addr: off</code>): start <code>sluice serve</code> with it on to run SQL
        here.
      </p>
    );
  }
  if (props.code === "SQL_NEEDS_LOGIN") {
    return (
      <p>
        The query server has users, and the console runs SQL only as the HTTP port's logged-in
        user: turn on <code>http.auth</code>.
      </p>
    );
  }
  return null;
}

// While it runs, the rows so far; then each statement's tag and count, the server's time,
// and the notices.
function RunStatus(props: { run: Run }) {
  const r = props.run;
  if (r.phase === "idle") return null;
  const rows = r.result?.rows.length ?? 0;
  return (
    <div class="run-status" data-testid="sql-status">
      <p role="status">
        {r.phase === "running" && `Running… ${fmt.count(rows)} rows so far.`}
        {r.phase === "cancelling" && `Cancelling… ${fmt.count(rows)} rows so far.`}
        {r.phase === "finished" &&
          r.elapsedMs !== null &&
          `Finished in ${fmt.count(r.elapsedMs)} ms.`}
        {r.phase === "finished" && r.error && (r.cancelled ? "Cancelled." : "Failed.")}
      </p>
      {r.statements.length > 0 && (
        <ol class="statements">
          {r.statements.map((s, i) => (
            <li key={i}>
              <code>{s.tag}</code> {fmt.count(s.rows)} {s.rows === 1 ? "row" : "rows"}
              <span class="muted"> · after {fmt.count(Math.round(s.afterMs))} ms</span>
              {s.truncated && (
                <span class="tag warn">truncated: the rows past the row limit were not sent</span>
              )}
            </li>
          ))}
        </ol>
      )}
      {r.notices.length > 0 && (
        <ul class="notices">
          {r.notices.map((n, i) => (
            <li key={i}>
              <span class="muted">NOTICE</span> {n}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function RunErrorView(props: { run: Run }) {
  const e = props.run.error;
  if (!e) return null;
  if ("api" in e) {
    return (
      <ErrorBox error={e.api}>
        <SqlOffHint code={e.api.code} />
      </ErrorBox>
    );
  }
  const cancelled = e.sql.sqlstate === "57014";
  return (
    <div class="error" role="alert" data-testid="sql-error">
      <strong>
        {cancelled && props.run.cancelled ? "Cancelled" : "ERROR"} {e.sql.sqlstate}
      </strong>
      : {e.sql.message}
      {e.sql.position !== undefined && (
        <span class="muted"> (at character {e.sql.position}, underlined in the editor)</span>
      )}
    </div>
  );
}

function isExplain(r: ResultSet): boolean {
  const [key, value] = r.columns;
  return r.columns.length === 2 && key.name === "explain_key" && value.name === "explain_value";
}

// The last result set: EXPLAIN's plan as text, else the grid, with a chart when a column
// is numeric.
function Result(props: { result: ResultSet; count: number }) {
  const { result, count } = props;
  const [chart, setChart] = useState(false);
  const [kind, setKind] = useState<ChartKind>("line");
  const chartable = useMemo(() => chartPlan(result.columns) !== null, [result.columns]);
  if (isExplain(result)) {
    return (
      <section class="explain" data-testid="sql-explain" aria-label="Query plan">
        {result.rows.map((row, i) => (
          <div key={i}>
            {result.rows.length > 1 && <h3>{String(row[0] ?? "")}</h3>}
            <pre>{String(row[1] ?? "")}</pre>
          </div>
        ))}
      </section>
    );
  }
  return (
    <section class="result" aria-label="Result">
      <div class="toolbar">
        <span class="muted">
          {fmt.count(count)} {count === 1 ? "row" : "rows"} × {result.columns.length}{" "}
          {result.columns.length === 1 ? "column" : "columns"}
        </span>
        {chartable && (
          <>
            <button type="button" aria-pressed={chart} onClick={() => setChart(!chart)}>
              Chart
            </button>
            {chart && (
              <div class="segmented" role="group" aria-label="Chart kind">
                <button
                  type="button"
                  class="small"
                  aria-pressed={kind === "line"}
                  onClick={() => setKind("line")}
                >
                  Line
                </button>
                <button
                  type="button"
                  class="small"
                  aria-pressed={kind === "bar"}
                  onClick={() => setKind("bar")}
                >
                  Bars
                </button>
              </div>
            )}
          </>
        )}
      </div>
      {chart && chartable && (
        <ResultChart columns={result.columns} rows={result.rows} count={count} kind={kind} />
      )}
      {result.columns.length > 0 && (
        <ResultGrid columns={result.columns} rows={result.rows} count={count} label="Result rows" />
      )}
    </section>
  );
}

// CSV and Parquet of the editor's query: POST /api/v1/sql/download runs it again and
// answers a file, saved through a link to it. Cancel stops its query by the id the page
// gave it; a file cut at max_rows or at the server's 1 GiB says so.
function Downloads(props: { sql: () => string; limit: () => number | null | undefined }) {
  const action = useAction();
  const [format, setFormat] = useState<"csv" | "parquet" | null>(null);
  const [cut, setCut] = useState<string | null>(null);
  const running = useRef<{ id: string; abort: AbortController } | null>(null);
  const download = async (f: "csv" | "parquet") => {
    const n = props.limit();
    if (n === undefined) return;
    setFormat(f);
    setCut(null);
    const id = `download-${crypto.randomUUID()}`;
    const abort = new AbortController();
    running.current = { id, abort };
    const body: { sql: string; format: string; max_rows?: number; query_id: string } = {
      sql: props.sql(),
      format: f,
      query_id: id,
    };
    if (n !== null) body.max_rows = n;
    await action.run(async () => {
      try {
        const res = await send("POST", paths.sqlDownload, body, {
          accept: "*/*",
          signal: abort.signal,
        });
        const truncated = res.headers.get("X-Sluice-Truncated");
        const url = URL.createObjectURL(await res.blob());
        const a = document.createElement("a");
        a.href = url;
        a.download = `result.${f}`;
        document.body.append(a);
        a.click();
        a.remove();
        // Not at once: the browser reads the file after the click returns.
        window.setTimeout(() => URL.revokeObjectURL(url), 60_000);
        setCut(
          truncated === "bytes"
            ? "The file was cut at 1 GiB of CSV: narrow the query for the rest."
            : truncated === "max_rows"
              ? `The file holds the first ${fmt.count(n ?? 100_000)} rows (the row limit).`
              : null,
        );
      } catch (e) {
        if (abort.signal.aborted) return; // cancelled: nothing to report
        throw e;
      } finally {
        running.current = null;
      }
    });
  };
  const cancel = () => {
    const r = running.current;
    if (!r) return;
    // The query first (it may still run), then the request.
    void request("DELETE", paths.sqlQuery(r.id)).catch(() => undefined);
    r.abort.abort();
  };
  // A SQL_ERROR carries the SQLSTATE beside its message.
  const body = action.error?.body as { error?: { sqlstate?: unknown } } | undefined;
  const sqlstate = body?.error?.sqlstate;
  return (
    <>
      <span class="muted" id="download-label">
        Download
      </span>
      <div class="segmented" role="group" aria-labelledby="download-label">
        <button type="button" disabled={action.busy} onClick={() => void download("csv")}>
          {action.busy && format === "csv" ? "CSV…" : "CSV"}
        </button>
        <button type="button" disabled={action.busy} onClick={() => void download("parquet")}>
          {action.busy && format === "parquet" ? "Parquet…" : "Parquet"}
        </button>
      </div>
      {action.busy && (
        <button type="button" class="small" onClick={cancel}>
          Cancel download
        </button>
      )}
      {cut && !action.busy && (
        <span class="muted" role="status">
          {cut}
        </span>
      )}
      {action.error && (
        <div class="download-error">
          <ErrorBox error={action.error}>
            {typeof sqlstate === "string" && <span class="muted"> (SQLSTATE {sqlstate})</span>}
            <SqlOffHint code={action.error.code} />
          </ErrorBox>
        </div>
      )}
    </>
  );
}
