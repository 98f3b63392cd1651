// Pipelines: the pipelines of `sluice serve --pipelines DIR` (one file each in the folder),
// their state, stop, start, restart and delete, and the memory budget they share; "New
// pipeline" opens the editor (pages/pipeline.tsx).
import { useState } from "preact/hooks";
import { type ApiError, paths, request } from "../api";
import { ConfirmByName } from "../components/confirm";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { useAction, useResource, useTitle } from "../hooks";
import { hrefs } from "../router";
import type { PipelineInfo, Pipelines as PipelinesData } from "../types";

export function Pipelines() {
  useTitle("Pipelines");
  const list = useResource(() => request<PipelinesData>("GET", paths.pipelines), "");
  const [deleting, setDeleting] = useState<string | null>(null);
  // The row whose stop, start or restart runs or failed last: one at a time for the list.
  const [acting, setActing] = useState<{ name: string; what: Lifecycle } | null>(null);
  const lifecycle = useAction();
  const off = list.error?.code === "PIPELINES_OFF";
  const data = off ? undefined : list.data;
  const pipelines = [...(data?.pipelines ?? [])].sort((a, b) =>
    fmt.compareText(a.name, b.name),
  );

  const act = async (name: string, what: Lifecycle) => {
    setActing({ name, what });
    const done = await lifecycle.run(() =>
      request<PipelineInfo>("POST", kLifecyclePath[what](name)),
    );
    if (done.ok) setActing(null);
    list.reload();
  };
  const failed =
    acting && lifecycle.error ? pipelines.find((p) => p.name === acting.name) : undefined;

  return (
    <section>
      <div class="title-row">
        <h1>Pipelines</h1>
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
        <Link href={hrefs.newPipeline} class="button primary">
          New pipeline
        </Link>
      </div>
      {off && list.error ? <PipelinesOff error={list.error} /> : <ErrorBox error={list.error} />}
      <Loading when={list.loading && !list.data && !list.error} />
      {data && (
        <>
          <dl class="facts">
            <div>
              <dt>Folder</dt>
              <dd>
                <code>{data.dir}</code>
              </dd>
            </div>
            <div>
              <dt>Memory in use / budget</dt>
              <dd title={kInUseTitle}>
                {fmt.bytes(data.memory_in_use_bytes)} / {fmt.bytes(data.memory_budget_bytes)}
              </dd>
            </div>
            <div>
              <dt>Running</dt>
              <dd>
                {pipelines.filter((p) => p.state === "running").length} of {pipelines.length}
              </dd>
            </div>
          </dl>
          <ErrorBox error={lifecycle.error}>
            {acting && (
              <p>
                {kLifecycleVerb[acting.what]} pipeline {acting.name} failed; it is as the table
                shows.
              </p>
            )}
            {lifecycle.error?.code === "PIPELINE_OVER_BUDGET" && (
              <OverBudgetHint list={data} limit={failed?.memory_limit_bytes} />
            )}
          </ErrorBox>
          <table class="pipelines">
            <caption class="sr-only">Pipelines</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col" class="num">Messages in</th>
                <th scope="col" class="num">Memory limit</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {pipelines.map((p) => (
                <tr key={p.name}>
                  <td>
                    <Link href={hrefs.pipeline(p.name)}>{p.name}</Link>
                    <div class="muted small">
                      <code>{p.file}</code>
                    </div>
                  </td>
                  <td>
                    <PipelineStateView info={p} />
                  </td>
                  <td class="num">{fmt.count(p.messages_in)}</td>
                  <td class="num">{fmt.bytes(p.memory_limit_bytes)}</td>
                  <td class="actions">
                    <LifecycleButton
                      p={p}
                      what={p.state === "running" ? "stop" : "start"}
                      busy={lifecycle.busy}
                      acting={acting}
                      onClick={act}
                    />{" "}
                    <LifecycleButton
                      p={p}
                      what="restart"
                      busy={lifecycle.busy}
                      acting={acting}
                      onClick={act}
                    />{" "}
                    <button
                      type="button"
                      class="small danger"
                      aria-label={`Delete pipeline ${p.name}`}
                      onClick={() => setDeleting(p.name)}
                    >
                      Delete…
                    </button>
                  </td>
                </tr>
              ))}
              {pipelines.length === 0 && (
                <tr>
                  <td colSpan={5} class="muted">
                    No pipelines in this folder yet: <Link href={hrefs.newPipeline}>write one</Link>,
                    or put a pipeline file (docs/pipelines.md) into <code>{data.dir}</code>.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        </>
      )}
      {deleting !== null && (
        <ConfirmByName
          what="pipeline"
          name={deleting}
          consequence={deleteConsequence(pipelines.find((p) => p.name === deleting)?.file)}
          onConfirm={() => request("DELETE", paths.pipeline(deleting))}
          onDone={() => {
            setDeleting(null);
            list.reload();
          }}
          onCancel={() => setDeleting(null)}
        />
      )}
    </section>
  );
}

const kInUseTitle =
  "the running pipelines' duckdb.memory_limit added up, of --pipelines-memory-budget";

export type Lifecycle = "stop" | "start" | "restart";

export const kLifecyclePath: Record<Lifecycle, (name: string) => string> = {
  stop: paths.stopPipeline,
  start: paths.startPipeline,
  restart: paths.restartPipeline,
};

// The buttons' words: as named, and while their request runs.
const kLifecycleLabel: Record<Lifecycle, [string, string]> = {
  stop: ["Stop", "Stopping…"],
  start: ["Start", "Starting…"],
  restart: ["Restart", "Restarting…"],
};
const kLifecycleVerb: Record<Lifecycle, string> = {
  stop: "Stopping",
  start: "Starting",
  restart: "Restarting",
};

export function lifecycleLabel(what: Lifecycle, running: boolean): string {
  return kLifecycleLabel[what][running ? 1 : 0];
}

function LifecycleButton(props: {
  p: PipelineInfo;
  what: Lifecycle;
  busy: boolean;
  acting: { name: string; what: Lifecycle } | null;
  onClick: (name: string, what: Lifecycle) => void;
}) {
  const { p, what } = props;
  const mine = props.busy && props.acting?.name === p.name && props.acting.what === what;
  return (
    <button
      type="button"
      class="small"
      aria-label={`${kLifecycleLabel[what][0]} pipeline ${p.name}`}
      disabled={props.busy}
      onClick={() => props.onClick(p.name, what)}
    >
      {lifecycleLabel(what, mine)}
    </button>
  );
}

// Why a start was refused for memory, in numbers: the running pipelines' limits, the
// budget, and this one's limit (`limit`, when known).
export function OverBudgetHint(props: { list: PipelinesData | undefined; limit?: number }) {
  const l = props.list;
  return (
    <p>
      Pipelines run only while their DuckDB memory limits (<code>duckdb.memory_limit</code>)
      fit, added up, within the budget (<code>--pipelines-memory-budget</code>)
      {l ? (
        <>
          : the running ones take {fmt.bytes(l.memory_in_use_bytes)} of{" "}
          {fmt.bytes(l.memory_budget_bytes)}
          {props.limit !== undefined && (
            <>
              , and this one's {fmt.bytes(props.limit)} would make{" "}
              {fmt.bytes(l.memory_in_use_bytes + props.limit)}
            </>
          )}
        </>
      ) : (
        ""
      )}
      . Stop another pipeline first, or lower this one's <code>duckdb.memory_limit</code>.
    </p>
  );
}

export function deleteConsequence(file: string | undefined): string {
  return (
    `It stops, and its file${file ? ` ${file}` : ""} is removed from the folder. ` +
    "Its consumer group's committed offsets stay. This cannot be undone."
  );
}

// "running", "stopped" (saying so when a user stopped it), or "failed" with the error it
// stopped on.
export function PipelineStateView(props: { info: PipelineInfo }) {
  const p = props.info;
  return (
    <>
      <span class={`state state-${p.state}`}>{p.state}</span>
      {p.state === "stopped" && p.stopped && <div class="muted small">by a user</div>}
      {p.state === "failed" && p.error && <div class="state-error">{p.error}</div>}
    </>
  );
}

// The answer of a server that runs no pipelines folder: the editor still checks and
// previews a file.
export function PipelinesOff(props: { error: ApiError; onEditor?: boolean }) {
  return (
    <div class="notice" role="status">
      <p>{props.error.message || "This server runs no pipelines folder."}</p>
      <p>
        To run pipelines from the console, start the server with{" "}
        <code>sluice serve --pipelines DIR</code>: every pipeline file in DIR runs, and the
        console saves new ones there. Meanwhile the editor still checks a pipeline file and
        previews it on a topic's messages
        {props.onEditor ? (
          "."
        ) : (
          <>
            : <Link href={hrefs.newPipeline}>New pipeline</Link>.
          </>
        )}
      </p>
    </div>
  );
}
