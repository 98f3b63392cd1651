// A query run from the SQL page: POST /api/v1/sql read as it streams (one JSON object a
// line, docs/design/0026-console.md "The API (v1)"), its rows appended to a plain array as
// they come, and the page re-rendered at most every kRenderEveryMs while rows arrive (a
// 100,000-row answer comes in hundreds of batches; each need not be a render). Cancel asks
// the server to cancel the query, and closes the request if the stream has not ended
// kCancelGraceMs later.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { ApiError, paths, request, send } from "./api";
import { asApiError } from "./hooks";
import type { SqlColumn, SqlComplete, SqlError, SqlLine, SqlValue } from "./types";

const kRenderEveryMs = 100;
const kCancelGraceMs = 2000;

// A result set: the columns of a statement and its rows so far. `rows` grows in place
// while the query runs.
export interface ResultSet {
  id: number;  // a new one for every result set, to start its views afresh
  columns: SqlColumn[];
  rows: SqlValue[][];
}

export interface StatementDone extends SqlComplete {
  afterMs: number;  // since the run started, when the page read its completion
}

export type RunError = { sql: SqlError } | { api: ApiError };

export interface Run {
  phase: "idle" | "running" | "cancelling" | "finished";
  sent: string;  // the SQL sent, for the error's position
  statements: StatementDone[];
  notices: string[];
  // The last result set that had columns (a later statement without rows, such as a SET,
  // leaves it shown).
  result: ResultSet | null;
  error: RunError | null;
  elapsedMs: number | null;  // the server's, from its "done" line
  cancelled: boolean;  // the user asked for it
}

const kIdle: Run = {
  phase: "idle",
  sent: "",
  statements: [],
  notices: [],
  result: null,
  error: null,
  elapsedMs: null,
  cancelled: false,
};

let resultIds = 0;

export function useSqlRun() {
  // The run in a ref, changed in place as lines arrive; `tick` re-renders the page.
  const run = useRef<Run>(kIdle);
  const [, setTick] = useState(0);
  const renderTimer = useRef(0);
  const abort = useRef<AbortController | null>(null);
  const queryId = useRef<string | null>(null);
  const cancelTimer = useRef(0);

  const render = useCallback((now: boolean) => {
    if (now) {
      window.clearTimeout(renderTimer.current);
      renderTimer.current = 0;
      setTick((t) => t + 1);
    } else if (renderTimer.current === 0) {
      renderTimer.current = window.setTimeout(() => {
        renderTimer.current = 0;
        setTick((t) => t + 1);
      }, kRenderEveryMs);
    }
  }, []);

  // Leaving the page closes the request, which cancels the query on the server (0026 #12).
  useEffect(
    () => () => {
      abort.current?.abort();
      window.clearTimeout(renderTimer.current);
      window.clearTimeout(cancelTimer.current);
    },
    [],
  );

  const start = useCallback(
    async (sql: string, maxRows: number | null) => {
      if (run.current.phase === "running" || run.current.phase === "cancelling") return;
      const controller = new AbortController();
      abort.current = controller;
      queryId.current = null;
      const r: Run = { ...kIdle, phase: "running", sent: sql, statements: [], notices: [] };
      run.current = r;
      render(true);
      const started = performance.now();
      let ended = false;  // a "done" or "error" line came

      const onLine = (line: SqlLine) => {
        if ("query_id" in line) {
          queryId.current = line.query_id;
        } else if ("columns" in line) {
          r.result = { id: ++resultIds, columns: line.columns, rows: [] };
          render(true);
        } else if ("rows" in line) {
          // One push at a time: push(...batch) would pass every row as an argument.
          const rows = r.result?.rows;
          if (!rows) throw new ApiError(0, "BAD_RESPONSE", "rows came before their columns");
          for (const row of line.rows) rows.push(row);
          render(false);
        } else if ("complete" in line) {
          r.statements.push({ ...line.complete, afterMs: performance.now() - started });
          render(true);
        } else if ("notice" in line) {
          r.notices.push(line.notice);
          render(true);
        } else if ("done" in line) {
          r.elapsedMs = line.done.elapsed_ms;
          ended = true;
        } else if ("error" in line) {
          r.error = { sql: line.error };
          ended = true;
        }
      };

      try {
        const body: { sql: string; max_rows?: number } = { sql };
        if (maxRows !== null) body.max_rows = maxRows;
        const res = await send("POST", paths.sql, body, {
          accept: "application/x-ndjson",
          signal: controller.signal,
        });
        if (!res.body) throw new ApiError(res.status, "BAD_RESPONSE", "the answer had no body");
        await readLines(res.body, (text) => {
          let line: SqlLine;
          try {
            line = JSON.parse(text) as SqlLine;
          } catch {
            const what = `a line of the answer was not JSON: ${text.slice(0, 120)}`;
            throw new ApiError(res.status, "BAD_RESPONSE", what);
          }
          onLine(line);
        });
        if (!ended) {
          throw new ApiError(res.status, "INCOMPLETE", "the answer ended before the query did");
        }
      } catch (e) {
        if (controller.signal.aborted && !r.cancelled) return;  // the page went
        if (!r.error) {
          const closed = controller.signal.aborted;
          r.error = { api: closed ? closedError(queryId.current) : asApiError(e) };
        }
        // A broken answer: closing the request cancels what still runs of it.
        controller.abort();
      } finally {
        if (abort.current === controller) abort.current = null;
        window.clearTimeout(cancelTimer.current);
      }
      r.phase = "finished";
      render(true);
    },
    [render],
  );

  const cancel = useCallback(async () => {
    const r = run.current;
    const controller = abort.current;
    if (r.phase !== "running" || !controller) return;
    r.cancelled = true;
    r.phase = "cancelling";
    render(true);
    const id = queryId.current;
    if (id === null) {
      // Before its id came: closing the request is what cancels it.
      controller.abort();
      return;
    }
    cancelTimer.current = window.setTimeout(() => controller.abort(), kCancelGraceMs);
    try {
      await request("DELETE", paths.sqlQuery(id));
    } catch {
      // 404: it ended meanwhile, and its stream says how. Any other failure: the request
      // is closed in kCancelGraceMs, which cancels it too.
    }
  }, [render]);

  return { run: run.current, start, cancel };
}

function closedError(id: string | null): ApiError {
  return new ApiError(
    0,
    "CANCELLED",
    id === null
      ? "the request was closed before the query started, which cancels it"
      : `the server did not confirm the cancel within ${kCancelGraceMs / 1000} s; the request ` +
        "was closed, which cancels the query",
  );
}

// Calls `onLine` with every non-empty line of `body` as it arrives. Only a new chunk is
// split, so a long line that comes in many chunks costs no more than a short one.
async function readLines(body: ReadableStream<Uint8Array>, onLine: (line: string) => void) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending: string[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    const nl = text.lastIndexOf("\n");
    if (nl < 0) {
      pending.push(text);
      continue;
    }
    const complete = pending.join("") + text.slice(0, nl);
    pending = [text.slice(nl + 1)];
    for (const line of complete.split("\n")) {
      if (line.trim() !== "") onLine(line);
    }
  }
  const last = pending.join("") + decoder.decode();
  if (last.trim() !== "") onLine(last);
}
