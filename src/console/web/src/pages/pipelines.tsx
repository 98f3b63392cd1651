// Pipelines: the pipelines of `sluice serve --pipelines DIR` (one file each in the folder),
// their state, restart and delete; "New pipeline" opens the editor (pages/pipeline.tsx).
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
  const [restarting, setRestarting] = useState<string | null>(null);
  const restart = useAction();
  const off = list.error?.code === "PIPELINES_OFF";
  const data = off ? undefined : list.data;
  const pipelines = [...(data?.pipelines ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  const limits = pipelines.reduce((sum, p) => sum + p.memory_limit_bytes, 0);

  const restartIt = async (name: string) => {
    setRestarting(name);
    const done = await restart.run(() => request<PipelineInfo>("POST", paths.restartPipeline(name)));
    if (done.ok) setRestarting(null);
    list.reload();
  };

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
              <dt>Memory budget</dt>
              <dd>{fmt.bytes(data.memory_budget_bytes)}</dd>
            </div>
            <div>
              <dt>Memory limits, added up</dt>
              <dd>{fmt.bytes(limits)}</dd>
            </div>
            <div>
              <dt>Running</dt>
              <dd>
                {pipelines.filter((p) => p.state === "running").length} of {pipelines.length}
              </dd>
            </div>
          </dl>
          <ErrorBox error={restart.error}>
            {restarting && <p>Restarting pipeline {restarting}; it is as the table shows.</p>}
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
                    <button
                      type="button"
                      class="small"
                      aria-label={`Restart pipeline ${p.name}`}
                      disabled={restart.busy}
                      onClick={() => restartIt(p.name)}
                    >
                      {restart.busy && restarting === p.name ? "Restarting…" : "Restart"}
                    </button>{" "}
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

export function deleteConsequence(file: string | undefined): string {
  return (
    `It stops, and its file${file ? ` ${file}` : ""} is removed from the folder. ` +
    "Its consumer group's committed offsets stay. This cannot be undone."
  );
}

// "running", "stopped", or "failed" with the error it stopped on.
export function PipelineStateView(props: { info: PipelineInfo }) {
  const p = props.info;
  return (
    <>
      <span class={`state state-${p.state}`}>{p.state}</span>
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
