// A pipeline's page and the new pipeline's: its file in a YAML editor (CodeMirror, loaded
// on these pages only), checked by the server as the user types, a preview of its
// handler's rows over a topic's newest messages, and "Save and start" (PUT, which starts
// a new pipeline or restarts the one it replaces). An existing pipeline's page also shows
// its state with stop, start, restart and delete, and its activity: charts of the last
// half hour, errors by phase and dead letters (pages/pipeline-activity.tsx).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, loginState, paths, request } from "../api";
import { ConfirmByName } from "../components/confirm";
import { ErrorBox, Link, Loading } from "../components/ui";
import { plural } from "../components/words";
import { YamlBox, type LineProblem, type YamlEditor } from "../components/yaml-box";
import * as fmt from "../format";
import { asApiError, useAction, useResource, useTitle } from "../hooks";
import { hrefs, navigate } from "../router";
import type {
  Pipeline as PipelineData,
  PipelineCheck,
  PipelineInfo,
  PipelinePreview,
  Pipelines as PipelinesData,
} from "../types";
import { PipelineActivity } from "./pipeline-activity";
import {
  deleteConsequence,
  kLifecyclePath,
  type Lifecycle,
  lifecycleLabel,
  OverBudgetHint,
  PipelinesOff,
} from "./pipelines";

// A pipeline that checks as it is; the user edits the brokers, the group and the topics.
const kTemplate = `# A pipeline of \`sluice serve --pipelines DIR\`; docs/pipelines.md lists every key.
# Edit the brokers, the group and the topics, try it with Preview, then Save and start.
pipeline:
  name: my-pipeline
  description: Prints each message of a topic
  batch_size: 1000
  flush_interval_seconds: 5
  source:
    type: kafka
    kafka:
      brokers: [127.0.0.1:9092]
      group_id: my-pipeline
      auto_offset_reset: earliest
      topics: [events]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT * FROM batch
  sink:
    type: console
`;

const kCheckDelayMs = 400;
const kPollMs = 5000;
const kMaxPreviewRows = 500;
const kNamePattern = /^[A-Za-z0-9._-]{1,100}$/;

export function NewPipeline() {
  useTitle("New pipeline");
  // Said before the user writes a pipeline that could not be saved.
  const folder = useResource(() => request<PipelinesData>("GET", paths.pipelines), "");
  return (
    <section>
      <p class="crumbs">
        <Link href="/pipelines">Pipelines</Link> /
      </p>
      <h1>New pipeline</h1>
      {folder.error?.code === "PIPELINES_OFF" && <PipelinesOff error={folder.error} onEditor />}
      {folder.data && (
        <p class="muted">
          Saved as a file of <code>{folder.data.dir}</code>, named after the pipeline, and
          started.
        </p>
      )}
      <PipelineEditor
        initial={kTemplate}
        onSaved={(name) => navigate(hrefs.pipeline(name))}
      />
    </section>
  );
}

export function Pipeline(props: { name: string }) {
  useTitle(props.name);
  const info = useResource(() => request<PipelineData>("GET", paths.pipeline(props.name)), props.name);
  const [deleting, setDeleting] = useState(false);
  const [saved, setSaved] = useState(false);
  // Stop, start and restart: one request at a time, the last one's error shown.
  const lifecycle = useAction();
  const [doing, setDoing] = useState<Lifecycle | null>(null);
  const p = info.data;
  const gone = info.error?.code === "UNKNOWN_PIPELINE" || info.error?.code === "PIPELINES_OFF";

  // Its state and count of messages, kept current; the editor's text is not touched.
  const hasData = p !== undefined;
  useEffect(() => {
    if (!hasData || gone) return;
    // Not in a hidden tab (nobody reads it; a login form over the page would be refused).
    const timer = window.setInterval(() => {
      if (!document.hidden && loginState().asking === null) info.reload();
    }, kPollMs);
    return () => window.clearInterval(timer);
  }, [hasData, gone, info.reload]);

  // The file's text as the page first read it: the editor starts from it once.
  const [initial, setInitial] = useState<string | null>(null);
  useEffect(() => {
    if (initial === null && typeof p?.yaml === "string") setInitial(p.yaml);
  }, [p?.yaml]);

  const act = async (what: Lifecycle) => {
    setSaved(false);
    setDoing(what);
    await lifecycle.run(() => request<PipelineInfo>("POST", kLifecyclePath[what](props.name)));
    setDoing(null);
    info.reload();
  };
  const button = (what: Lifecycle) => (
    <button type="button" onClick={() => act(what)} disabled={lifecycle.busy || !p}>
      {lifecycleLabel(what, doing === what)}
    </button>
  );

  return (
    <section>
      <p class="crumbs">
        <Link href="/pipelines">Pipelines</Link> /
      </p>
      <div class="title-row">
        <h1>{props.name}</h1>
        <button type="button" onClick={info.reload} disabled={info.loading}>
          Refresh
        </button>
        {p?.state === "running" && button("stop")}
        {(p?.state === "stopped" || p?.state === "failed") && button("start")}
        {button("restart")}
        <button type="button" class="danger" onClick={() => setDeleting(true)} disabled={!p}>
          Delete…
        </button>
      </div>
      {info.error?.code === "PIPELINES_OFF" ? (
        <PipelinesOff error={info.error} />
      ) : (
        <ErrorBox error={info.error}>
          {info.error?.code === "UNKNOWN_PIPELINE" && (
            <p>
              The folder has no such pipeline (any more). <Link href="/pipelines">All pipelines</Link>
            </p>
          )}
        </ErrorBox>
      )}
      <ErrorBox error={lifecycle.error}>
        {lifecycle.error?.code === "PIPELINE_OVER_BUDGET" && (
          <OverBudget limit={p?.memory_limit_bytes} />
        )}
        {lifecycle.error?.code === "PIPELINE_NOT_STARTED" && (
          <p>It did not start: fix what the message names, then try again.</p>
        )}
      </ErrorBox>
      <Loading when={info.loading && !p && !info.error} />
      {p && (
        <dl class="facts">
          <div>
            <dt>State</dt>
            <dd>
              <span class={`state state-${p.state}`}>{p.state}</span>
            </dd>
          </div>
          <div>
            <dt>Messages in</dt>
            <dd>{fmt.count(p.messages_in)}</dd>
          </div>
          <div>
            <dt>Memory limit</dt>
            <dd>{fmt.bytes(p.memory_limit_bytes)}</dd>
          </div>
          <div>
            <dt>File</dt>
            <dd>
              <code>{p.file}</code>
            </dd>
          </div>
        </dl>
      )}
      {p?.state === "failed" && (
        <div class="error" role="alert">
          <strong>It stopped on an error</strong>
          {p.error ? `: ${p.error}` : ""}
          <p>Fix the file and Save and start, or Start it as it is.</p>
        </div>
      )}
      {p?.state === "stopped" && p.stopped && (
        <p class="notice" role="status">
          Stopped by a user. Its file is kept as <code>{p.file}</code>, so it stays stopped when
          sluice restarts; Start runs it again.
        </p>
      )}
      {p && !gone && <PipelineActivity name={props.name} />}
      {p && <h2 id="file">File</h2>}
      {saved && p && (
        <p class="ok" role="status">
          Saved; the pipeline restarted from the new file.
        </p>
      )}
      {p && p.yaml === null && initial === null && (
        <div class="error" role="alert">
          <strong>Its file could not be read</strong>: {p.file}
        </div>
      )}
      {initial !== null && (
        <PipelineEditor
          name={props.name}
          initial={initial}
          onSaved={() => {
            setSaved(true);
            info.reload();
          }}
          onEdit={() => setSaved(false)}
        />
      )}
      {deleting && (
        <ConfirmByName
          what="pipeline"
          name={props.name}
          consequence={deleteConsequence(p?.file)}
          onConfirm={() => request("DELETE", paths.pipeline(props.name))}
          onDone={() => navigate("/pipelines")}
          onCancel={() => setDeleting(false)}
        />
      )}
    </section>
  );
}

// A start refused for memory: the numbers of the budget, from the list (asked when the
// refusal came: the pipeline's own answer does not carry them).
function OverBudget(props: { limit: number | undefined }) {
  const list = useResource(() => request<PipelinesData>("GET", paths.pipelines), "");
  return <OverBudgetHint list={list.data} limit={props.limit} />;
}

// A warning of the check ("pipeline.yaml:12: path: message") as line and message.
function splitWarning(w: string): { line: number | null; message: string } {
  const m = /^pipeline\.yaml:(?:(\d+):)?\s*([\s\S]*)$/.exec(w);
  if (!m) return { line: null, message: w };
  return { line: m[1] ? Number(m[1]) : null, message: m[2] };
}

interface Shown {
  line: number | null;
  message: string;
  severity: "error" | "warning";
}

function shownProblems(check: PipelineCheck | undefined): Shown[] {
  if (!check) return [];
  return [
    ...check.problems.map((p): Shown => ({ line: p.line, message: p.message, severity: "error" })),
    ...check.warnings.map((w): Shown => ({ ...splitWarning(w), severity: "warning" })),
  ];
}

// An INVALID_PIPELINE error carries the check's fields: shown like the check's own.
function checkOf(e: ApiError | undefined): PipelineCheck | undefined {
  if (e?.code !== "INVALID_PIPELINE") return undefined;
  const b = e.body as Partial<PipelineCheck> | undefined;
  if (!b || !Array.isArray(b.problems)) return undefined;
  return {
    valid: false,
    name: null,
    topics: [],
    warnings: [],
    description: null,
    ...b,
    problems: b.problems,
  };
}

function PipelineEditor(props: {
  name?: string;  // an existing pipeline's: fixed
  initial: string;
  onSaved: (name: string) => void;
  onEdit?: () => void;
}) {
  const isNew = props.name === undefined;
  const [text, setText] = useState(props.initial);
  const [savedText, setSavedText] = useState(props.initial);
  const editor = useRef<YamlEditor | null>(null);
  const current = () => editor.current?.text() ?? text;

  // The check, as the user types (kCheckDelayMs after the last key); only the newest
  // request's answer counts.
  const [check, setCheck] = useState<PipelineCheck | undefined>(undefined);
  const [checking, setChecking] = useState(true);
  const [checkError, setCheckError] = useState<ApiError | undefined>(undefined);
  const latest = useRef(0);
  const first = useRef(true);
  useEffect(() => {
    const id = ++latest.current;
    setChecking(true);
    const timer = window.setTimeout(
      async () => {
        try {
          const c = await request<PipelineCheck>("POST", paths.validatePipeline, { yaml: text });
          if (id !== latest.current) return;
          setCheck(c);
          setCheckError(undefined);
        } catch (e) {
          if (id === latest.current) setCheckError(asApiError(e));
        } finally {
          if (id === latest.current) setChecking(false);
        }
      },
      first.current ? 0 : kCheckDelayMs,
    );
    first.current = false;
    return () => window.clearTimeout(timer);
  }, [text]);

  const shown = useMemo(() => shownProblems(check), [check]);
  const inEditor = useMemo(
    () =>
      shown
        .filter((p): p is Shown & { line: number } => p.line !== null)
        .map((p): LineProblem => ({ line: p.line, message: p.message, severity: p.severity })),
    [shown],
  );

  // The name: typed on a new pipeline, taken from pipeline.name until the user types one.
  const [name, setName] = useState(props.name ?? "");
  const [nameTyped, setNameTyped] = useState(false);
  const fileName = check?.name ?? "";
  useEffect(() => {
    if (isNew && !nameTyped && fileName !== "") setName(fileName);
  }, [fileName]);
  const target = (props.name ?? name).trim();
  const nameDiffers = fileName !== "" && target !== "" && fileName !== target;

  // Preview: the handler's SQL over the newest messages of the source's first topic.
  const [limit, setLimit] = useState("20");
  const [preview, setPreview] = useState<PipelinePreview | undefined>(undefined);
  const previewing = useAction();
  const busy = useRef(false);
  const runPreview = async () => {
    if (busy.current) return;
    busy.current = true;
    const n = Math.min(500, Math.max(1, Math.floor(Number(limit)) || 20));
    setLimit(String(n));
    const done = await previewing.run(() =>
      request<PipelinePreview>("POST", paths.previewPipeline, { yaml: current(), limit: n }),
    );
    busy.current = false;
    setPreview(done.ok ? done.value : undefined);
  };
  useEffect(() => {
    const c = checkOf(previewing.error);
    if (c) setCheck(c);
  }, [previewing.error]);

  // Save and start: PUT writes the file and starts (or restarts) the pipeline.
  const saving = useAction();
  const save = async () => {
    const yaml = current();
    const done = await saving.run(() => {
      if (!kNamePattern.test(target) || target.startsWith(".")) {
        throw new ApiError(
          0,
          "INVALID_PIPELINE_NAME",
          "a pipeline's name is 1 to 100 of A-Z a-z 0-9 . _ -, not starting with '.'",
        );
      }
      return request<PipelineInfo>("PUT", paths.pipeline(target), { yaml });
    });
    if (done.ok) {
      setSavedText(yaml);
      props.onSaved(target);
    }
  };
  useEffect(() => {
    const c = checkOf(saving.error);
    if (c) setCheck(c);
  }, [saving.error]);

  const onChange = (t: string) => {
    setText(t);
    props.onEdit?.();
  };
  // Ctrl/Cmd+Enter outside the editor too (the editor handles its own and says so).
  const onKeyDown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.defaultPrevented) {
      e.preventDefault();
      void runPreview();
    }
  };
  const dirty = !isNew && text !== savedText;

  return (
    <div class="pipeline-editor" onKeyDown={onKeyDown}>
      {isNew && (
        <div class="fields">
          <label>
            Name
            <input
              value={name}
              required
              maxLength={100}
              spellcheck={false}
              autoComplete="off"
              placeholder="my-pipeline"
              aria-describedby="name-help"
              onInput={(e) => {
                setName(e.currentTarget.value);
                setNameTyped(true);
              }}
            />
          </label>
          <span id="name-help" class="muted small">
            The file is <code>{target || "NAME"}.yaml</code> in the folder.
          </span>
        </div>
      )}
      {nameDiffers && (
        <p class="warn" role="status">
          The file's <code>pipeline.name</code> is <code>{fileName}</code>, not{" "}
          <code>{target}</code>: the two must be the same (or leave <code>pipeline.name</code> out).
        </p>
      )}
      <CheckSummary
        check={check}
        checking={checking}
        error={checkError}
        shown={shown}
        onLine={(n) => editor.current?.goToLine(n)}
      />
      <YamlBox
        initial={props.initial}
        label={`Pipeline file${props.name ? ` of ${props.name}` : ""} (YAML)`}
        problems={inEditor}
        onChange={onChange}
        onRun={() => void runPreview()}
        onReady={(ed) => {
          editor.current = ed;
        }}
      />
      <p class="muted small keys">
        Ctrl+Enter (⌘+Enter): Preview · Tab indents; Esc then Tab leaves the editor · F8: the
        next problem · Ctrl+Shift+M: all problems
      </p>
      <div class="buttons">
        <button type="button" class="primary" disabled={saving.busy} onClick={save}>
          {saving.busy ? "Saving…" : "Save and start"}
        </button>
        <button type="button" disabled={previewing.busy} onClick={() => void runPreview()}>
          {previewing.busy ? "Previewing…" : "Preview"}
        </button>
        <label class="inline">
          on the newest
          <input
            type="number"
            class="limit"
            min={1}
            max={500}
            value={limit}
            aria-label="Messages to preview"
            onInput={(e) => setLimit(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter") {
                e.preventDefault();
                void runPreview();
              }
            }}
          />
          messages
        </label>
        {dirty && <span class="tag">unsaved changes</span>}
      </div>
      <ErrorBox error={saving.error}>
        <SaveHint error={saving.error} />
      </ErrorBox>
      <PreviewView
        preview={preview}
        busy={previewing.busy}
        error={previewing.error}
      />
    </div>
  );
}

function SaveHint(props: { error: ApiError | undefined }) {
  switch (props.error?.code) {
    case "INVALID_PIPELINE":
      return <p>Nothing was saved: the file has the problems listed above the editor.</p>;
    case "PIPELINE_NOT_STARTED":
      return <p>Nothing was changed: the pipeline did not start from this file.</p>;
    case "PIPELINE_FILE_EXISTS":
      return <p>Nothing was changed: choose another name, or remove that file first.</p>;
    case "PIPELINES_OFF":
      return (
        <p>
          This server saves no pipelines: start it with <code>sluice serve --pipelines DIR</code>.
          Check and Preview work without.
        </p>
      );
    default:
      return null;
  }
}

// Above the editor: whether the file checks, and every problem and warning (those of a
// line also show under it in the editor; a click moves there).
function CheckSummary(props: {
  check: PipelineCheck | undefined;
  checking: boolean;
  error: ApiError | undefined;
  shown: Shown[];
  onLine: (line: number) => void;
}) {
  const { check, shown } = props;
  const errors = check?.problems.length ?? 0;
  const warnings = check?.warnings.length ?? 0;
  let status: string;
  if (props.error) status = `Not checked: ${props.error.code} ${props.error.message}`;
  else if (!check) status = "Checking…";
  else if (check.valid) {
    const topics = check.topics.length === 1 ? "topic" : "topics";
    status =
      `The file checks: it reads ${topics} ${check.topics.join(", ")}` +
      (warnings > 0 ? `, with ${plural(warnings, "warning")}.` : ".");
  } else {
    status = `${plural(errors, "problem")}` + (warnings > 0 ? `, ${plural(warnings, "warning")}` : "");
  }
  return (
    <div class="check">
      <p class={`check-status ${props.error ? "muted" : check?.valid ? "ok" : check ? "bad" : "muted"}`}>
        <span role="status">{status}</span>
        {props.checking && check && <span class="muted"> (checking…)</span>}
      </p>
      {shown.length > 0 && (
        <ul class="problems" data-testid="pipeline-problems">
          {shown.map((p, i) => (
            <li key={i} class={p.severity}>
              <span class="sr-only">{p.severity === "error" ? "Problem" : "Warning"}: </span>
              {p.line !== null && (
                <button type="button" class="link" onClick={() => props.onLine(p.line as number)}>
                  line {p.line}
                </button>
              )}
              {p.line !== null ? " " : ""}
              {p.message}
            </li>
          ))}
        </ul>
      )}
      {check?.valid && check.description && (
        <details class="description">
          <summary>What it does</summary>
          <pre>{check.description}</pre>
        </details>
      )}
    </div>
  );
}

function PreviewView(props: {
  preview: PipelinePreview | undefined;
  busy: boolean;
  error: ApiError | undefined;
}) {
  const { preview, error } = props;
  if (!preview && !error && !props.busy) return null;
  return (
    <section class="preview" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview</h2>
      <p class="muted small">
        The handler's SQL over the newest messages of the source's first topic, on this broker.
        Nothing is written and nothing is committed.
      </p>
      {props.busy && <p class="muted">running…</p>}
      <ErrorBox error={error}>
        {error?.code === "UNKNOWN_TOPIC_OR_PART" && (
          <p>The source's first topic does not exist on this broker: create it, or name another.</p>
        )}
        {error?.code === "INVALID_PIPELINE" && <p>The file's problems are listed above the editor.</p>}
      </ErrorBox>
      {preview && !error && <PreviewResult preview={preview} />}
    </section>
  );
}

// A row that is not an object (a row that was not JSON) shows in this column.
const kValueColumn = "(row)";

export function PreviewResult(props: { preview: PipelinePreview }) {
  const p = props.preview;
  const rows = p.rows.slice(0, kMaxPreviewRows);
  const columns: string[] = [];
  const seen = new Set<string>();
  for (const r of rows) {
    const keys = isRecord(r) ? Object.keys(r) : [kValueColumn];
    for (const k of keys) {
      if (!seen.has(k)) {
        seen.add(k);
        columns.push(k);
      }
    }
  }
  return (
    <>
      <p role="status">
        {fmt.count(p.messages)} messages of topic{" "}
        <Link href={hrefs.topic(p.topic)}>{p.topic}</Link>: {plural(p.rows.length, "row")}
        {p.rows.length > rows.length ? `, the first ${rows.length} shown` : ""}
        {p.errors.length > 0 ? `, ${plural(p.errors.length, "message")} not decoded` : ""}.
      </p>
      {p.errors.length > 0 && (
        <div class="decode-errors">
          <strong>Messages the handler could not read</strong>
          <ul>
            {p.errors.map((e, i) => (
              <li key={i}>{e}</li>
            ))}
          </ul>
        </div>
      )}
      {rows.length === 0 ? (
        <p class="muted">The handler returned no rows for these messages.</p>
      ) : (
        <div class="scroll-x">
          <table class="preview-rows" data-testid="preview-rows">
            <thead>
              <tr>
                {columns.map((c) => (
                  <th scope="col" key={c}>
                    {c}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((r, i) => (
                <tr key={i}>
                  {columns.map((c) => (
                    <Cell key={c} value={isRecord(r) ? r[c] : c === kValueColumn ? r : undefined} />
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function Cell(props: { value: unknown }) {
  const v = props.value;
  if (v === undefined) return <td />;
  if (v === null) return <td class="muted">null</td>;
  if (typeof v === "number") return <td class="num">{String(v)}</td>;
  if (typeof v === "string") return <td>{v}</td>;
  if (typeof v === "boolean") return <td>{String(v)}</td>;
  return (
    <td>
      <code>{JSON.stringify(v)}</code>
    </td>
  );
}
