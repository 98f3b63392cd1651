// The first page: from nothing to a live result in numbered steps, each with a default so
// that pressing the step's button is enough. 1 a topic (made or picked), 2 messages
// arriving (samples on asking), 3 a pipeline's SQL over them with its rows previewed as it
// is typed, 4 where the rows go (an Iceberg table of the server's warehouse by default),
// 5 the pipeline started, 6 its output growing, 7 a query of it. Every request goes
// through the API the other pages use (docs/design/0026-console.md); nothing is shown
// that the server did not answer.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, namespacePath, paths, request } from "../api";
import { ResultGrid } from "../components/result-grid";
import { SqlBox } from "../components/sql-box";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { asApiError, useAction, useResource, useTitle, type Resource } from "../hooks";
import { hrefs } from "../router";
import { useSqlRun, type Run } from "../sql-run";
import {
  batchRelation,
  brokerAddress,
  defaultPipelineName,
  defaultSinkTopic,
  defaultTable,
  isPipelineName,
  kDefaultSql,
  kDefaultTopic,
  kIntervalSeconds,
  kSampleCount,
  pipelineYaml,
  resultQuery,
  sampleEvent,
  splitTableName,
  type SinkSpec,
} from "../start-plan";
import type {
  Cluster,
  Message,
  Messages,
  Pipeline as PipelineData,
  PipelineCheck,
  PipelineInfo,
  PipelinePreview,
  Pipelines,
  Produced,
  Table,
  Tables,
  Topic,
  TopicSummary,
} from "../types";
import { MessageTable } from "./messages";
import { PreviewResult } from "./pipeline";
import { PipelineStateView } from "./pipelines";

const kPollMs = 2000;
const kPreviewDelayMs = 600;
const kPreviewBusyRetryMs = 1500;
const kPreviewMessages = 100;
const kFeedMessages = 10;
const kSendAtOnce = 4;

type StepStatus = "done" | "current" | "waiting";

// What the server offers, read once: its brokers (the pipeline's source), its pipelines
// folder (or none), its lake (a warehouse directory, a REST catalog, or none).
interface Env {
  cluster: Resource<Cluster>;
  pipelines: Resource<Pipelines>;
  tables: Resource<Tables>;
}

export function Start() {
  useTitle("Start");
  const env: Env = {
    cluster: useResource(() => request<Cluster>("GET", paths.cluster), ""),
    pipelines: useResource(() => request<Pipelines>("GET", paths.pipelines), ""),
    tables: useResource(() => request<Tables>("GET", paths.tables), ""),
  };
  // The topic chosen; also in the address (?topic=), so that a reload keeps it.
  const [topic, setTopic] = useState<string | null>(
    () => new URLSearchParams(location.search).get("topic") || null,
  );
  const choose = (t: string | null) => {
    setTopic(t);
    const to = t === null ? "/start" : `/start?${new URLSearchParams({ topic: t })}`;
    history.replaceState(null, "", to);
  };
  return (
    <section class="start">
      <h1>Start</h1>
      <p class="lead">
        From nothing to a live result: a topic, messages arriving, the SQL of a pipeline tried
        on them as you type, the pipeline running into a table, and a query of that table.
        Each step has a default: pressing its button is enough.
      </p>
      <ol class="steps">
        <TopicStep topic={topic} onChosen={choose} />
        {topic === null ? (
          <>
            <Waiting n={2} title="Messages" after="Choose a topic first (step 1)." />
            <Waiting n={3} title="The pipeline's SQL" />
            <Waiting n={4} title="Where the rows go" />
            <Waiting n={5} title="Start the pipeline" />
            <Waiting n={6} title="Watch it fill" />
            <Waiting n={7} title="Query it" />
          </>
        ) : (
          <Walk key={topic} topic={topic} env={env} />
        )}
      </ol>
    </section>
  );
}

function Step(props: {
  n: number;
  title: string;
  status: StepStatus;
  children?: ComponentChildren;
}) {
  const { n, status } = props;
  return (
    <li class={`step step-${status}`} aria-labelledby={`step-${n}`} data-testid={`start-step-${n}`}>
      <h2 id={`step-${n}`}>
        <span class="step-n" aria-hidden="true">
          {status === "done" ? "✓" : n}
        </span>
        <span>
          <span class="sr-only">Step {n}: </span>
          {props.title}
          {status === "done" && <span class="sr-only"> (done)</span>}
        </span>
      </h2>
      {props.children}
    </li>
  );
}

function Waiting(props: { n: number; title: string; after?: string }) {
  return (
    <Step n={props.n} title={props.title} status="waiting">
      {props.after && <p class="muted">{props.after}</p>}
    </Step>
  );
}

// Step 1: make a topic ("clicks", one partition) or pick one of the cluster's.
function TopicStep(props: { topic: string | null; onChosen: (t: string | null) => void }) {
  const list = useResource(
    () => request<{ topics: TopicSummary[] }>("GET", paths.topics(false)),
    props.topic ?? "",
  );
  const names = (list.data?.topics ?? []).map((t) => t.name).sort(fmt.compareText);
  const hasDefault = names.includes(kDefaultTopic);
  // Until the user chooses: the existing "clicks" (a walk done before), else a new one.
  const [mode, setMode] = useState<"new" | "existing" | null>(null);
  const [name, setName] = useState(kDefaultTopic);
  const [picked, setPicked] = useState<string | null>(null);
  const [how, setHow] = useState<string | null>(null);
  const action = useAction();
  const shownMode = mode ?? (hasDefault ? "existing" : "new");
  const pick = picked ?? (hasDefault ? kDefaultTopic : (names[0] ?? ""));

  if (props.topic !== null) {
    return (
      <Step n={1} title="A topic" status="done">
        <p role="status">
          {how ?? "Using topic"} <Link href={hrefs.topic(props.topic)}>{props.topic}</Link>.{" "}
          <button
            type="button"
            class="small"
            onClick={() => {
              setHow(null);
              props.onChosen(null);
            }}
          >
            Choose another topic
          </button>
        </p>
      </Step>
    );
  }

  const submit = async (e: Event) => {
    e.preventDefault();
    if (shownMode === "existing") {
      if (pick === "") return;
      setHow("Using topic");
      props.onChosen(pick);
      return;
    }
    const wanted = name.trim();
    const done = await action.run(async () => {
      try {
        await request<Topic>("POST", paths.createTopic, { name: wanted, partitions: 1 });
        return "Created topic";
      } catch (err) {
        // Made before (an earlier walk): it is the one wanted.
        if (err instanceof ApiError && err.code === "TOPIC_ALREADY_EXISTS") {
          return "The topic existed already; using";
        }
        throw err;
      }
    });
    if (done.ok) {
      setHow(done.value);
      props.onChosen(wanted);
    }
  };

  return (
    <Step n={1} title="A topic" status="current">
      <p class="muted">A topic holds the messages the pipeline reads.</p>
      <form class="panel" onSubmit={submit}>
        <fieldset class="choices">
          <legend>The topic</legend>
          <label class="inline">
            <input
              type="radio"
              name="topic-mode"
              checked={shownMode === "new"}
              onChange={() => setMode("new")}
            />
            Create a new topic
          </label>
          <label class="inline">
            <input
              type="radio"
              name="topic-mode"
              checked={shownMode === "existing"}
              disabled={names.length === 0}
              onChange={() => setMode("existing")}
            />
            Use an existing topic
            {list.data && names.length === 0 && (
              <span class="muted small">(there are none yet)</span>
            )}
          </label>
        </fieldset>
        <div class="fields">
          {shownMode === "new" ? (
            <>
              <label>
                Name
                <input
                  required
                  value={name}
                  spellcheck={false}
                  autoComplete="off"
                  maxLength={249}
                  onInput={(e) => setName(e.currentTarget.value)}
                />
              </label>
              <span class="muted small">One partition; letters, digits, '.', '_' and '-'.</span>
            </>
          ) : (
            <label>
              Topic
              <select value={pick} onChange={(e) => setPicked(e.currentTarget.value)}>
                {names.map((n) => (
                  <option key={n} value={n}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
          )}
        </div>
        <ErrorBox error={action.error} />
        <ErrorBox error={list.error} />
        <div class="buttons">
          <button type="submit" class="primary" disabled={action.busy}>
            {shownMode === "existing"
              ? "Use this topic"
              : action.busy
                ? "Creating…"
                : "Create topic"}
          </button>
        </div>
      </form>
    </Step>
  );
}

interface Polled<T> {
  data: T | undefined;
  error: ApiError | undefined;
  refresh: () => void;  // polls now (or right after the request under way)
}

// Calls `load` every kPollMs (from the end of the last call, never two at once) while it
// is not null, from afresh whenever `key` changes.
function usePoll<T>(load: (() => Promise<T>) | null, key: string): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const loadRef = useRef(load);
  loadRef.current = load;
  const kick = useRef<() => void>(() => {});
  const active = load !== null;
  useEffect(() => {
    setData(undefined);
    setError(undefined);
    if (!active) return;
    let stopped = false;
    let running = false;
    let again = false;
    let timer = 0;
    const poll = async () => {
      window.clearTimeout(timer);
      if (running) {
        again = true;
        return;
      }
      const fn = loadRef.current;
      if (!fn) return;
      running = true;
      try {
        const v = await fn();
        if (!stopped) {
          setData(v);
          setError(undefined);
        }
      } catch (e) {
        if (!stopped) setError(asApiError(e));
      }
      running = false;
      if (stopped) return;
      if (again) {
        again = false;
        void poll();
      } else {
        timer = window.setTimeout(poll, kPollMs);
      }
    };
    kick.current = () => void poll();
    void poll();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      kick.current = () => {};
    };
  }, [key, active]);
  const refresh = useCallback(() => kick.current(), []);
  return { data, error, refresh };
}

// A topic's message count (high - low over its partitions) and its newest messages.
interface Feed {
  count: number;
  partitions: number;
  messages: Message[];
}

async function loadFeed(topic: string): Promise<Feed> {
  const q = new URLSearchParams({ limit: String(kFeedMessages), order: "newest" });
  const [t, m] = await Promise.all([
    request<Topic>("GET", paths.topic(topic)),
    request<Messages>("GET", paths.messages(topic, q)),
  ]);
  return {
    count: t.partitions.reduce((sum, p) => sum + Math.max(0, p.high - p.low), 0),
    partitions: t.partitions.length,
    messages: m.messages,
  };
}

// The pipeline as started: what the watch and the query steps follow.
interface Started {
  id: number;
  name: string;
  sink: SinkSpec;
  yaml: string;
}

// What the sink holds so far: the table (null before its first commit) or the topic.
type SinkState =
  | { kind: "iceberg"; table: Table | null }
  | { kind: "kafka"; feed: Feed };

async function loadSink(sink: SinkSpec): Promise<SinkState> {
  if (sink.kind === "kafka") return { kind: "kafka", feed: await loadFeed(sink.topic) };
  const split = splitTableName(sink.table);
  if (!split) throw new ApiError(0, "INVALID_REQUEST", `not a table name: ${sink.table}`);
  try {
    return {
      kind: "iceberg",
      table: await request<Table>("GET", paths.table(split.namespace, split.table)),
    };
  } catch (e) {
    // Not there until the pipeline's first commit makes it.
    if (e instanceof ApiError && e.code === "NO_SUCH_TABLE") {
      return { kind: "iceberg", table: null };
    }
    throw e;
  }
}

function currentSnapshot(t: Table) {
  return t.snapshots.find((s) => s.snapshot_id === t.current_snapshot_id) ?? null;
}

function summaryCount(summary: Record<string, string> | undefined, key: string): number | null {
  const v = summary?.[key];
  if (v === undefined) return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

// Steps 2 to 7, for one topic (made afresh when the topic changes).
function Walk(props: { topic: string; env: Env }) {
  const { topic, env } = props;
  const feed = usePoll(() => loadFeed(topic), topic);
  const count = feed.data?.count ?? 0;
  const brokers = env.cluster.data
    ? [...env.cluster.data.brokers].sort((a, b) => a.node_id - b.node_id).map(brokerAddress)
    : null;

  // Sample messages, from step 2 or 6.
  const sending = useAction();
  const [sent, setSent] = useState<{ done: number; of: number } | null>(null);
  const [sends, setSends] = useState(0);
  const send = async () => {
    setSent({ done: 0, of: kSampleCount });
    const done = await sending.run(() =>
      sendSamples(topic, kSampleCount, (n) => setSent({ done: n, of: kSampleCount })),
    );
    if (done.ok) setSends((s) => s + 1);
    feed.refresh();
  };

  // Step 3: the SQL, and its preview as the user types or messages arrive.
  const [sql, setSql] = useState(kDefaultSql);
  const previewYaml =
    brokers && brokers.length > 0
      ? pipelineYaml({ name: defaultPipelineName(topic), topic, brokers, sql, sink: null })
      : null;
  const preview = usePreview(previewYaml, count);
  const relations = useBatchRelations(feed.data?.messages);

  // Step 4: the sink. The Iceberg table needs the server's warehouse directory.
  const warehouse = env.tables.data?.warehouse ?? null;
  const lakeKnown = env.tables.data !== undefined || env.tables.error !== undefined;
  const [sinkKind, setSinkKind] = useState<"iceberg" | "kafka" | null>(null);
  const kind = sinkKind ?? (warehouse !== null ? "iceberg" : "kafka");
  const [tableName, setTableName] = useState(defaultTable(topic));
  const [sinkTopic, setSinkTopic] = useState(defaultSinkTopic(topic));
  // None until the default is known (the lake's answer decides it) or the user chose.
  const sink: SinkSpec | null =
    sinkKind === null && !lakeKnown
      ? null
      : kind === "kafka"
        ? { kind, topic: sinkTopic.trim() }
        : warehouse !== null
          ? { kind, table: tableName.trim(), warehouse }
          : null;
  const [pipelineName, setPipelineName] = useState(defaultPipelineName(topic));
  const pipelinesOff = env.pipelines.error?.code === "PIPELINES_OFF";

  // Step 5: started with PUT; steps 6 and 7 follow what was started.
  const [started, setStarted] = useState<Started | null>(null);
  const pipeline = usePoll(
    started ? () => request<PipelineData>("GET", paths.pipeline(started.name)) : null,
    started ? `pipeline ${started.id}` : "",
  );
  const output = usePoll(
    started ? () => loadSink(started.sink) : null,
    started ? `sink ${started.id}` : "",
  );
  useEffect(() => {
    if (sends > 0) output.refresh();
  }, [sends]);
  const out = output.data;
  const hasOutput =
    out !== undefined &&
    (out.kind === "iceberg"
      ? (out.table?.current_snapshot_id ?? null) !== null
      : out.feed.count > 0);
  const query =
    started && out && hasOutput
      ? resultQuery(started.sink, out.kind === "iceberg" ? (out.table?.sql_name ?? null) : null)
      : null;
  const sqlRun = useSqlRun();
  const queried = sqlRun.run.phase === "finished" && !sqlRun.run.error;

  const previewOk = preview.result !== undefined && "ok" in preview.result;
  const status = (done: boolean, ready: boolean): StepStatus =>
    done ? "done" : ready ? "current" : "waiting";

  return (
    <>
      <Step n={2} title="Messages" status={status(count > 0, true)}>
        <p class="muted">
          The newest messages of <code>{topic}</code>, every {kPollMs / 1000} s. Send samples
          (JSON clicks of a web site), or produce your own with any Kafka client.
        </p>
        <div class="buttons">
          <button
            type="button"
            class={count === 0 ? "primary" : undefined}
            disabled={sending.busy}
            onClick={() => void send()}
          >
            {sending.busy
              ? `Sending… ${sent?.done ?? 0} of ${sent?.of ?? kSampleCount}`
              : "Send sample messages"}
          </button>
          <span class="muted small">
            {kSampleCount} messages like{" "}
            <code>{'{"user": "u3", "page": "/pricing", "ms": 12}'}</code>
          </span>
        </div>
        <ErrorBox error={sending.error} />
        <ErrorBox error={feed.error}>
          <span class="muted"> (trying again every {kPollMs / 1000} s)</span>
        </ErrorBox>
        <Loading when={!feed.data && !feed.error} />
        {feed.data && (
          <>
            <p role="status" data-testid="start-count">
              {fmt.count(count)} {count === 1 ? "message" : "messages"} in {topic}
              {feed.data.partitions !== 1 ? ` (${feed.data.partitions} partitions)` : ""}
              {count > 0 ? `; the newest ${Math.min(count, kFeedMessages)}:` : ": none yet."}
            </p>
            {feed.data.messages.length > 0 && (
              <div class="scroll-x feed">
                <MessageTable rows={feed.data.messages} empty="" />
              </div>
            )}
          </>
        )}
      </Step>

      <Step n={3} title="The pipeline's SQL" status={status(previewOk && count > 0, count > 0)}>
        <p class="muted">
          A pipeline reads the topic in batches. Each batch is the table <code>batch</code>,
          with a column per field of the messages' JSON
          {relations[0].columns.length > 0 && (
            <>
              {" "}
              (here{" "}
              {relations[0].columns.map((c, i) => (
                <span key={c.name}>
                  {i > 0 ? ", " : ""}
                  <code>{c.name}</code>
                </span>
              ))}
              )
            </>
          )}
          ; the SQL's rows over it are the pipeline's output. The preview below runs it on the
          newest {kPreviewMessages} messages as you type.
        </p>
        <SqlBox
          initial={kDefaultSql}
          relations={relations}
          onChange={setSql}
          onRun={preview.now}
          onReady={() => {}}
        />
        <p class="muted small keys">
          Ctrl+Enter (⌘+Enter): preview now · Ctrl+Space: complete a name · Esc then Tab leaves
          the editor
        </p>
        <PreviewPanel preview={preview} count={count} brokersError={env.cluster.error} />
      </Step>

      <Step
        n={4}
        title="Where the rows go"
        status={status(started !== null, previewOk || pipelinesOff)}
      >
        {pipelinesOff ? (
          <PipelinesOffNotice />
        ) : (
          <SinkChoice
            kind={kind}
            onKind={setSinkKind}
            warehouse={warehouse}
            tables={env.tables}
            tableName={tableName}
            onTableName={setTableName}
            sinkTopic={sinkTopic}
            onSinkTopic={setSinkTopic}
          />
        )}
      </Step>

      {pipelinesOff ? (
        <>
          <Waiting n={5} title="Start the pipeline" after="Needs a pipelines folder (step 4)." />
          <Waiting n={6} title="Watch it fill" />
          <Waiting n={7} title="Query it" />
        </>
      ) : (
        <>
          <Step n={5} title="Start the pipeline" status={status(started !== null, previewOk)}>
            <StartForm
              topic={topic}
              brokers={brokers}
              sql={sql}
              sink={sink}
              name={pipelineName}
              onName={setPipelineName}
              env={env}
              started={started}
              onStarted={setStarted}
            />
          </Step>

          <Step n={6} title="Watch it fill" status={status(hasOutput, started !== null)}>
            {started === null ? (
              <p class="muted">
                Once the pipeline runs (step 5), its output shows here as it grows.
              </p>
            ) : (
              <Watch
                started={started}
                pipeline={pipeline}
                output={output}
                sending={sending.busy}
                onSend={() => void send()}
              />
            )}
          </Step>

          <Step n={7} title="Query it" status={status(queried, query !== null)}>
            <QueryStep query={query} started={started} sqlRun={sqlRun} />
          </Step>
        </>
      )}
    </>
  );
}

// Produces `n` sample events to `topic`, kSendAtOnce requests at a time; the first failure
// stops the rest and is thrown.
async function sendSamples(topic: string, n: number, onProgress: (sent: number) => void) {
  let next = 0;
  let sent = 0;
  let failed = false;
  const worker = async () => {
    while (next < n && !failed) {
      next++;
      const s = sampleEvent();
      try {
        await request<Produced>("POST", paths.produce(topic), { key: s.key, value: s.value });
      } catch (e) {
        failed = true;
        throw e;
      }
      onProgress(++sent);
    }
  };
  await Promise.all(Array.from({ length: kSendAtOnce }, worker));
}

// The relation `batch` the editor completes, from the messages shown; the same object
// while their fields stay the same (a new one reconfigures the editor).
function useBatchRelations(messages: Message[] | undefined) {
  const relation = batchRelation(
    (messages ?? []).map((m) => (m.value_encoding === "json" ? m.value : null)),
  );
  const signature = relation.columns.map((c) => `${c.name}:${c.type}`).join(",");
  return useMemo(() => [relation], [signature]);
}

type PreviewResultState = { ok: PipelinePreview } | { error: ApiError };

interface PreviewState {
  result: PreviewResultState | undefined;
  busy: boolean;
  now: () => void;
}

// The preview of `yaml` over the topic's newest messages: kPreviewDelayMs after the last
// change of the file (the SQL typed) or of the message count, at once on Ctrl+Enter; one
// request at a time, and the newest text is what the last one sends. The server runs one
// preview at a time in all (PREVIEW_BUSY): tried again shortly.
function usePreview(yaml: string | null, count: number): PreviewState {
  const [result, setResult] = useState<PreviewResultState | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const yamlRef = useRef(yaml);
  yamlRef.current = yaml;
  const state = useRef({ running: false, pending: false, alive: true, retry: 0 });
  useEffect(
    () => () => {
      state.current.alive = false;
      window.clearTimeout(state.current.retry);
    },
    [],
  );

  const run = useCallback(async () => {
    const s = state.current;
    const text = yamlRef.current;
    if (text === null || !s.alive) return;
    if (s.running) {
      s.pending = true;
      return;
    }
    window.clearTimeout(s.retry);
    s.running = true;
    setBusy(true);
    let retry = false;
    try {
      const p = await request<PipelinePreview>("POST", paths.previewPipeline, {
        yaml: text,
        limit: kPreviewMessages,
      });
      if (s.alive && !s.pending) setResult({ ok: p });
    } catch (e) {
      const err = asApiError(e);
      if (err.code === "PREVIEW_BUSY") retry = true;
      else if (s.alive && !s.pending) setResult({ error: err });
    }
    s.running = false;
    if (!s.alive) return;
    if (s.pending) {
      s.pending = false;
      void run();
    } else if (retry) {
      s.retry = window.setTimeout(() => void run(), kPreviewBusyRetryMs);
    } else {
      setBusy(false);
    }
  }, []);

  const ready = yaml !== null && count > 0;
  const first = useRef(true);
  useEffect(() => {
    if (!ready) return;
    const timer = window.setTimeout(() => void run(), first.current ? 0 : kPreviewDelayMs);
    first.current = false;
    return () => window.clearTimeout(timer);
  }, [ready ? `${yaml}\n${count}` : null]);

  const now = useCallback(() => void run(), [run]);
  return { result, busy, now };
}

function PreviewPanel(props: {
  preview: PreviewState;
  count: number;
  brokersError: ApiError | undefined;
}) {
  const { result, busy } = props.preview;
  const error = result && "error" in result ? result.error : undefined;
  return (
    <section class="preview" aria-labelledby="start-preview-title" aria-busy={busy}>
      <h3 id="start-preview-title">
        Preview {busy && <span class="muted small">(running…)</span>}
      </h3>
      {props.brokersError && (
        <ErrorBox error={props.brokersError}>
          <p>The pipeline's source needs the cluster's brokers (GET /api/v1/cluster).</p>
        </ErrorBox>
      )}
      {props.count === 0 && !result && (
        <p class="muted">Runs once the topic has messages (step 2).</p>
      )}
      <ErrorBox error={error}>
        <PreviewHint error={error} />
      </ErrorBox>
      {result && "ok" in result && <PreviewResult preview={result.ok} />}
    </section>
  );
}

function PreviewHint(props: { error: ApiError | undefined }) {
  const e = props.error;
  if (!e) return null;
  if (e.code === "INVALID_PIPELINE") {
    const problems = (e.body as Partial<PipelineCheck> | undefined)?.problems ?? [];
    return (
      <ul class="plain">
        {problems.map((p, i) => (
          <li key={i}>{p.message}</li>
        ))}
      </ul>
    );
  }
  if (e.code === "PREVIEW_FAILED") {
    return <p>The SQL did not run on these messages: change it above; the preview runs again.</p>;
  }
  return null;
}

function PipelinesOffNotice() {
  return (
    <div class="notice" role="status" data-testid="start-pipelines-off">
      <p>
        <strong>This server runs no pipelines.</strong> Running one needs a pipelines folder:
        start the server with <code>sluice serve --pipelines DIR</code> (and{" "}
        <code>--warehouse DIR</code> for a table to write into), then come back to this page.
      </p>
      <p class="muted small">Steps 1 to 3 work without it: the preview writes nothing.</p>
    </div>
  );
}

function SinkChoice(props: {
  kind: "iceberg" | "kafka";
  onKind: (k: "iceberg" | "kafka") => void;
  warehouse: string | null;
  tables: Resource<Tables>;
  tableName: string;
  onTableName: (t: string) => void;
  sinkTopic: string;
  onSinkTopic: (t: string) => void;
}) {
  const { kind, warehouse, tables } = props;
  const tablesOff = tables.error?.code === "TABLES_OFF";
  const rest = tables.data !== undefined && tables.data.warehouse === null;
  const exists = tables.data?.tables.some(
    (t) => `${namespacePath(t.namespace)}.${t.name}` === props.tableName.trim(),
  );
  return (
    <>
      <fieldset class="choices">
        <legend>The pipeline writes its rows to</legend>
        <label class="inline">
          <input
            type="radio"
            name="sink"
            checked={kind === "iceberg"}
            disabled={warehouse === null}
            onChange={() => props.onKind("iceberg")}
          />
          An Iceberg table in the lake
        </label>
        {kind === "iceberg" && warehouse !== null && (
          <div class="choice-detail">
            <label>
              Table (namespace.table)
              <input
                value={props.tableName}
                spellcheck={false}
                autoComplete="off"
                onInput={(e) => props.onTableName(e.currentTarget.value)}
              />
            </label>
            <p class="muted small">
              In the warehouse <code>{warehouse}</code>; a commit every {kIntervalSeconds} s.
              {exists
                ? " The table exists: the pipeline appends to it."
                : " Made by the first commit."}
            </p>
          </div>
        )}
        <label class="inline">
          <input
            type="radio"
            name="sink"
            checked={kind === "kafka"}
            onChange={() => props.onKind("kafka")}
          />
          A Kafka topic
        </label>
        {kind === "kafka" && (
          <div class="choice-detail">
            <label>
              Topic
              <input
                value={props.sinkTopic}
                spellcheck={false}
                autoComplete="off"
                maxLength={249}
                onInput={(e) => props.onSinkTopic(e.currentTarget.value)}
              />
            </label>
            <p class="muted small">
              Made with one partition when it does not exist; each row a JSON message.
            </p>
          </div>
        )}
      </fieldset>
      {warehouse === null && (tablesOff || rest) && (
        <div class="notice" role="status">
          <p>
            {rest
              ? "The lake here is a REST catalog, which this page cannot write to: "
              : "This server has no lake: "}
            the Iceberg table option needs <code>sluice serve --warehouse DIR</code>. The rows go
            to a Kafka topic instead.
          </p>
        </div>
      )}
      {tables.error && !tablesOff && <ErrorBox error={tables.error} />}
      <Loading when={tables.loading && !tables.data && !tables.error} />
    </>
  );
}

function StartForm(props: {
  topic: string;
  brokers: string[] | null;
  sql: string;
  sink: SinkSpec | null;
  name: string;
  onName: (n: string) => void;
  env: Env;
  started: Started | null;
  onStarted: (s: Started) => void;
}) {
  const { topic, brokers, sink, env, started } = props;
  const name = props.name.trim();
  const yaml =
    brokers && sink ? pipelineYaml({ name, topic, brokers, sql: props.sql, sink }) : null;
  const action = useAction();
  const ids = useRef(0);
  const folder = env.pipelines.data?.dir;
  const replaces =
    started?.name !== name && env.pipelines.data?.pipelines.some((p) => p.name === name);
  const changed = started !== null && (started.yaml !== yaml || started.name !== name);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (yaml === null || sink === null) return;
    const done = await action.run(async () => {
      if (!isPipelineName(name)) {
        throw new ApiError(
          0,
          "INVALID_PIPELINE_NAME",
          "a pipeline's name is 1 to 100 of A-Z a-z 0-9 . _ -, not starting with '.'",
        );
      }
      if (sink.kind === "iceberg" && !splitTableName(sink.table)) {
        throw new ApiError(
          0,
          "INVALID_TABLE_NAME",
          "the table is namespace.table: levels of letters, digits and _ joined by '.' (step 4)",
        );
      }
      if (sink.kind === "kafka") {
        if (sink.topic === topic) {
          throw new ApiError(
            0,
            "INVALID_REQUEST",
            "the pipeline cannot write to the topic it reads (step 4)",
          );
        }
        // The sink does not make its topic (a producer's metadata request would only where
        // the broker auto-creates): made here, one partition; there already is fine.
        try {
          await request<Topic>("POST", paths.createTopic, { name: sink.topic, partitions: 1 });
        } catch (err) {
          if (!(err instanceof ApiError && err.code === "TOPIC_ALREADY_EXISTS")) throw err;
        }
      }
      return request<PipelineInfo>("PUT", paths.pipeline(name), { yaml });
    });
    if (done.ok) props.onStarted({ id: ++ids.current, name, sink, yaml });
  };

  const problems =
    action.error?.code === "INVALID_PIPELINE"
      ? ((action.error.body as Partial<PipelineCheck> | undefined)?.problems ?? [])
      : [];
  return (
    <form onSubmit={submit}>
      <div class="fields">
        <label>
          Pipeline name
          <input
            value={props.name}
            required
            maxLength={100}
            spellcheck={false}
            autoComplete="off"
            onInput={(e) => props.onName(e.currentTarget.value)}
          />
        </label>
        <span class="muted small">
          Saved as <code>{folder ?? "DIR"}/{name || "NAME"}.yaml</code> and started; it runs
          until removed on the <Link href="/pipelines">Pipelines</Link> page.
        </span>
      </div>
      {replaces && (
        <p class="warn" role="status">
          A pipeline named <code>{name}</code> exists: starting replaces it with this one.
        </p>
      )}
      {yaml !== null && (
        <details class="description">
          <summary>The pipeline file</summary>
          <pre data-testid="start-yaml">{yaml}</pre>
        </details>
      )}
      <ErrorBox error={env.cluster.error} />
      <ErrorBox error={env.pipelines.error} />
      <div class="buttons">
        <button
          type="submit"
          class={started === null ? "primary" : undefined}
          disabled={action.busy || yaml === null || (started !== null && !changed)}
        >
          {action.busy
            ? "Starting…"
            : started === null
              ? "Start pipeline"
              : changed
                ? "Restart with the changes"
                : "Started"}
        </button>
        {yaml === null && !env.cluster.error && (
          <span class="muted small">loading the server's settings…</span>
        )}
      </div>
      <ErrorBox error={action.error}>
        {problems.length > 0 && (
          <ul class="plain">
            {problems.map((p, i) => (
              <li key={i}>
                {p.line !== null ? `line ${p.line}: ` : ""}
                {p.message}
              </li>
            ))}
          </ul>
        )}
        {action.error?.code === "PIPELINE_NOT_STARTED" && (
          <p>Nothing was changed: the pipeline did not start from this file.</p>
        )}
      </ErrorBox>
      {started !== null && !action.error && (
        <p class="ok" role="status">
          Pipeline <Link href={hrefs.pipeline(started.name)}>{started.name}</Link> started.
        </p>
      )}
    </form>
  );
}

function Watch(props: {
  started: Started;
  pipeline: Polled<PipelineData>;
  output: Polled<SinkState>;
  sending: boolean;
  onSend: () => void;
}) {
  const { started, pipeline, output } = props;
  const p = pipeline.data;
  const out = output.data;
  return (
    <div data-testid="start-watch">
      <p>
        Pipeline <Link href={hrefs.pipeline(started.name)}>{started.name}</Link>:{" "}
        {p ? (
          <>
            <PipelineStateView info={p} /> · {fmt.count(p.messages_in)} messages in
          </>
        ) : (
          <span class="muted">…</span>
        )}
      </p>
      <ErrorBox error={pipeline.error} />
      <ErrorBox error={output.error}>
        <span class="muted"> (trying again every {kPollMs / 1000} s)</span>
      </ErrorBox>
      {out?.kind === "iceberg" && <TableGrowth spec={started.sink} table={out.table} />}
      {out?.kind === "kafka" && started.sink.kind === "kafka" && (
        <>
          <p role="status">
            <span data-testid="start-records">{fmt.count(out.feed.count)}</span>{" "}
            {out.feed.count === 1 ? "message" : "messages"} in{" "}
            <Link href={hrefs.topic(started.sink.topic)}>{started.sink.topic}</Link>
            {out.feed.count === 0 ? ": none yet." : "; the newest:"}
          </p>
          {out.feed.messages.length > 0 && (
            <div class="scroll-x feed">
              <MessageTable rows={out.feed.messages} empty="" />
            </div>
          )}
        </>
      )}
      <div class="buttons">
        <button type="button" disabled={props.sending} onClick={props.onSend}>
          {props.sending ? "Sending…" : "Send more messages"}
        </button>
        <span class="muted small">another {kSampleCount} samples to the source topic</span>
      </div>
    </div>
  );
}

function TableGrowth(props: { spec: SinkSpec; table: Table | null }) {
  const t = props.table;
  if (t === null) {
    return (
      <p class="muted" role="status">
        Waiting for the table's first commit: the pipeline commits its rows every{" "}
        {kIntervalSeconds} s once it has some…
      </p>
    );
  }
  const current = currentSnapshot(t);
  const ns = namespacePath(t.namespace);
  return (
    <>
      <dl class="facts" role="status">
        <div>
          <dt>Table</dt>
          <dd>
            <Link href={hrefs.table(ns, t.name)}>{`${ns}.${t.name}`}</Link>
          </dd>
        </div>
        <div>
          <dt>Records</dt>
          <dd data-testid="start-records">
            {fmt.count(summaryCount(current?.summary, "total-records") ?? 0)}
          </dd>
        </div>
        <div>
          <dt>Snapshots</dt>
          <dd>{fmt.count(t.snapshots.length)}</dd>
        </div>
        <div>
          <dt>Data files</dt>
          <dd>{fmt.count(summaryCount(current?.summary, "total-data-files"))}</dd>
        </div>
        <div>
          <dt>Last commit</dt>
          <dd>{fmt.time(current?.timestamp_ms)}</dd>
        </div>
      </dl>
      {t.snapshots.length > 0 && (
        <table class="snapshots compact">
          <caption class="sr-only">The newest commits</caption>
          <thead>
            <tr>
              <th scope="col">Committed</th>
              <th scope="col">Operation</th>
              <th scope="col" class="num">Rows added</th>
              <th scope="col" class="num">Rows in all</th>
            </tr>
          </thead>
          <tbody>
            {t.snapshots.slice(0, 5).map((s) => (
              <tr key={s.snapshot_id}>
                <td class="time">{fmt.time(s.timestamp_ms)}</td>
                <td>{s.operation}</td>
                <td class="num">{fmt.count(summaryCount(s.summary, "added-records"))}</td>
                <td class="num">{fmt.count(summaryCount(s.summary, "total-records"))}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function QueryStep(props: {
  query: string | null;
  started: Started | null;
  sqlRun: ReturnType<typeof useSqlRun>;
}) {
  const { query, started, sqlRun } = props;
  const run = sqlRun.run;
  const busy = run.phase === "running" || run.phase === "cancelling";
  if (query === null) {
    return (
      <p class="muted">
        {started === null
          ? "Once the pipeline has written rows (step 6), query them here."
          : started.sink.kind === "iceberg"
            ? "Ready once the table has its first commit (step 6)."
            : "Ready once the topic has the pipeline's first rows (step 6)."}
      </p>
    );
  }
  return (
    <>
      <p>
        <code data-testid="start-query">{query}</code>
      </p>
      <div class="buttons">
        <button
          type="button"
          class={run.phase === "idle" ? "primary" : undefined}
          disabled={busy}
          onClick={() => void sqlRun.start(query, null)}
        >
          {busy ? "Running…" : run.phase === "idle" ? "Query it" : "Query again"}
        </button>
        <Link href={hrefs.sql(query)}>Open in the SQL editor</Link>
      </div>
      <QueryResult run={run} />
    </>
  );
}

function QueryResult(props: { run: Run }) {
  const r = props.run;
  if (r.phase === "idle") return null;
  const rows = r.result?.rows.length ?? 0;
  const e = r.error;
  const took = r.elapsedMs !== null ? ` in ${fmt.count(r.elapsedMs)} ms` : "";
  return (
    <>
      <p role="status" class="muted">
        {r.phase !== "finished"
          ? `Running… ${fmt.count(rows)} rows so far.`
          : e
            ? "Failed."
            : `${fmt.count(rows)} ${rows === 1 ? "row" : "rows"}${took}.`}
      </p>
      {e && "api" in e && <ErrorBox error={e.api} />}
      {e && "sql" in e && (
        <div class="error" role="alert">
          <strong>ERROR {e.sql.sqlstate}</strong>: {e.sql.message}
        </div>
      )}
      {r.result && r.result.columns.length > 0 && (
        <ResultGrid
          key={r.result.id}
          columns={r.result.columns}
          rows={r.result.rows}
          count={r.result.rows.length}
          label="Rows of the query"
        />
      )}
    </>
  );
}
