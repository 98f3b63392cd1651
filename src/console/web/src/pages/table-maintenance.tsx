// A lake table's maintenance (POST .../maintenance): compaction (small files rewritten into
// files of a target size) and expiry (old snapshots and the files only they use deleted).
// Each is previewed first (dry_run, open to every user); Run asks, then sends the request
// the preview showed (super users only: it rewrites and deletes files as the process).
// Changing a field drops the preview, so that what runs is what was shown.
import { useState } from "preact/hooks";
import { ApiError, paths, request } from "../api";
import { ErrorBox } from "../components/ui";
import { plural } from "../components/words";
import * as fmt from "../format";
import { useAction } from "../hooks";
import type { CompactResult, ExpirePreview, ExpireResult } from "../types";

const kMiB = 1024 * 1024;
const kUnitMs = { days: 24 * 3600 * 1000, hours: 3600 * 1000 } as const;
type Unit = keyof typeof kUnitMs;

interface Target {
  namespace: string;
  name: string;
  sqlName: string;
  onChanged: () => void;  // after a run: the table's detail is read again
}

export function Maintenance(props: Target) {
  return (
    <section aria-labelledby="maintenance">
      <h2 id="maintenance">Maintenance</h2>
      <p class="muted small">
        A preview reads only the table's metadata and changes nothing. Running rewrites or
        deletes the table's files as the sluice process: only its super users may (or anyone,
        on a loopback HTTP port without logins).
      </p>
      <Compact {...props} />
      <Expire {...props} />
    </section>
  );
}

function NeedsSuperUser(props: { error: ApiError | undefined }) {
  if (props.error?.code !== "MAINTENANCE_NEEDS_SUPER_USER") return null;
  return (
    <p>
      Nothing was changed: running it needs a super user of this server
      (<code>authorization.super_users</code>). The preview is open to you.
    </p>
  );
}

// One maintenance action's lifecycle, shared by both forms: a preview (dry_run) of a
// request, kept with what it showed; Run sends that same request after asking; a change of
// a field drops both the preview and the last result.
function usePreviewThenRun<Req extends object, Shown, Done>(props: Target) {
  const [preview, setPreview] = useState<(Shown & { req: Req }) | null>(null);
  const [done, setDone] = useState<Done | null>(null);
  const action = useAction();
  const url = paths.tableMaintenance(props.namespace, props.name);
  const changed = () => {
    setPreview(null);
    setDone(null);
  };
  // `make` checks the fields and gives the request, and what the preview adds to its answer.
  const previewIt = async (make: () => Promise<Shown & { req: Req }>) => {
    setDone(null);
    const r = await action.run(make);
    setPreview(r.ok ? r.value : null);
  };
  const ask = (req: Req) => request<unknown>("POST", url, { ...req, dry_run: true });
  const run = async (question: string) => {
    if (!preview || !window.confirm(question)) return;
    const r = await action.run(() =>
      request<Done>("POST", url, { ...preview.req, dry_run: false }),
    );
    if (r.ok) {
      setPreview(null);
      setDone(r.value);
      props.onChanged();
    }
  };
  return { preview, setPreview, done, action, changed, previewIt, ask, run };
}

// Under a preview: run what it showed, or drop it.
function RunButtons(props: {
  label: string;
  doing: string;
  busy: boolean;
  disabled: boolean;
  onRun: () => void;
  onCancel: () => void;
}) {
  return (
    <div class="buttons">
      <button
        type="button"
        class="primary"
        disabled={props.busy || props.disabled}
        onClick={props.onRun}
      >
        {props.label}
      </button>
      {props.busy && <span class="muted">{props.doing}</span>}
      <button type="button" onClick={props.onCancel} disabled={props.busy}>
        Cancel
      </button>
    </div>
  );
}

interface CompactRequest {
  action: "compact";
  target_file_size_bytes: number;
}

// "12 files (3.4 MiB, 1,200 records) of 2 partitions into 1 file"
function compaction(r: CompactResult): string {
  return (
    `${plural(r.files_rewritten, "file")} (${fmt.bytes(r.bytes_rewritten)}, ` +
    `${plural(r.records, "record")}) of ${plural(r.partitions, "partition")} into ` +
    plural(r.files_written, "file")
  );
}

function Compact(props: Target) {
  const [size, setSize] = useState("128");
  const m = usePreviewThenRun<CompactRequest, { result: CompactResult }, CompactResult>(props);
  const { preview, setPreview, done, action } = m;
  const changed = (v: string) => {
    setSize(v);
    m.changed();
  };
  const previewIt = (e: Event) => {
    e.preventDefault();
    void m.previewIt(async () => {
      const mib = Number(size);
      if (size.trim() === "" || !Number.isFinite(mib) || mib < 1) {
        throw new ApiError(0, "INVALID_REQUEST", "target file size: at least 1 MiB");
      }
      const req: CompactRequest = {
        action: "compact",
        target_file_size_bytes: Math.round(mib * kMiB),
      };
      return { req, result: (await m.ask(req)) as CompactResult };
    });
  };
  const run = () => {
    if (!preview) return;
    void m.run(
      `Compact ${props.sqlName}? It rewrites ${compaction(preview.result)} and commits them as ` +
        "a new snapshot; the table's rows stay the same.",
    );
  };

  const nothing = preview !== null && preview.result.files_rewritten === 0;
  return (
    <form class="panel" onSubmit={previewIt} aria-labelledby="compact-title">
      <h3 id="compact-title">Compact</h3>
      <p class="muted small">
        Rewrites a partition's small data files into files of about the target size: fewer
        files make reads faster. Appends committed meanwhile are kept.
      </p>
      <div class="fields">
        <label>
          Target file size (MiB)
          <input
            type="number"
            class="limit"
            min={1}
            step="any"
            required
            value={size}
            onInput={(e) => changed(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={action.busy}>
          Preview compaction
        </button>
      </div>
      {preview && (
        <div class="maintenance-plan" aria-live="polite">
          <p>
            {nothing
              ? "Nothing to compact: no partition has small files to put together at this size."
              : `Would rewrite ${compaction(preview.result)}.`}
          </p>
          <RunButtons
            label="Run compaction"
            doing="compacting…"
            busy={action.busy}
            disabled={nothing}
            onRun={run}
            onCancel={() => setPreview(null)}
          />
        </div>
      )}
      {done && (
        <p class="ok" role="status">
          {done.snapshot_id === null
            ? "Nothing was rewritten: no partition had small files to put together."
            : `Compacted: rewrote ${compaction(done)}, as snapshot ${done.snapshot_id}.`}
        </p>
      )}
      <ErrorBox error={action.error}>
        <NeedsSuperUser error={action.error} />
      </ErrorBox>
    </form>
  );
}

interface ExpireRequest {
  action: "expire";
  older_than_ms: number;
}

function Expire(props: Target) {
  const [amount, setAmount] = useState("7");
  const [unit, setUnit] = useState<Unit>("days");
  const m = usePreviewThenRun<ExpireRequest, { result: ExpirePreview; age: string }, ExpireResult>(
    props,
  );
  const { preview, setPreview, done, action } = m;
  const changed = <T,>(set: (v: T) => void) => (v: T) => {
    set(v);
    m.changed();
  };
  const previewIt = (e: Event) => {
    e.preventDefault();
    void m.previewIt(async () => {
      const n = Number(amount);
      if (amount.trim() === "" || !Number.isFinite(n) || n < 0) {
        throw new ApiError(0, "INVALID_REQUEST", "older than: a number of days or hours, ≥ 0");
      }
      const req: ExpireRequest = { action: "expire", older_than_ms: Math.round(n * kUnitMs[unit]) };
      const result = (await m.ask(req)) as ExpirePreview;
      return { req, result, age: plural(n, unit.slice(0, -1), unit) };
    });
  };
  const run = () => {
    if (!preview) return;
    const p = preview.result;
    void m.run(
      `Expire the snapshots of ${props.sqlName} older than ${preview.age}? This deletes ` +
        `${plural(p.snapshots.length, "snapshot")} and ${plural(p.files, "file")} for good ` +
        "(and leftovers of failed commits); queries can no longer read the table as of them.",
    );
  };

  const p = preview?.result;
  return (
    <form class="panel" onSubmit={previewIt} aria-labelledby="expire-title">
      <h3 id="expire-title">Expire snapshots</h3>
      <p class="muted small">
        Removes the snapshots replaced longer ago than this, and deletes the files only they
        use. The current snapshot is always kept.
      </p>
      <div class="fields">
        <label>
          Older than
          <input
            type="number"
            class="limit"
            min={0}
            step="any"
            required
            value={amount}
            onInput={(e) => changed(setAmount)(e.currentTarget.value)}
          />
        </label>
        <label>
          Unit
          <select value={unit} onChange={(e) => changed(setUnit)(e.currentTarget.value as Unit)}>
            <option value="days">days</option>
            <option value="hours">hours</option>
          </select>
        </label>
        <button type="submit" disabled={action.busy}>
          Preview expiry
        </button>
      </div>
      {preview && p && (
        <div class="maintenance-plan" aria-live="polite">
          <p>
            {p.snapshots.length === 0
              ? `No snapshot was replaced more than ${preview.age} ago: none would be removed.`
              : `Would remove ${plural(p.snapshots.length, "snapshot")} and ` +
                `${plural(p.files, "file")}.`}{" "}
            <span class="muted">
              The run also deletes files no snapshot uses (leftovers of failed commits) that are
              that old and at least an hour old; the preview does not list them.
            </span>
          </p>
          {p.snapshots.length > 0 && (
            <details class="description">
              <summary>Which snapshots</summary>
              <ul class="plain">
                {p.snapshots.map((id) => (
                  <li key={id}>
                    <code>{id}</code>
                  </li>
                ))}
              </ul>
            </details>
          )}
          {p.carries_offsets && (
            <p class="warn" role="status">
              Some of these snapshots hold the only record of how far a pipeline read its Kafka
              topics (<code>sluice.offsets.*</code>): the run first commits a snapshot that
              carries those offsets forward, so that they are not lost with them.
            </p>
          )}
          <RunButtons
            label="Run expiry"
            doing="expiring…"
            busy={action.busy}
            disabled={false}
            onRun={run}
            onCancel={() => setPreview(null)}
          />
        </div>
      )}
      {done && (
        <p class="ok" role="status">
          Expired: removed {plural(done.snapshots_removed, "snapshot")} (
          {fmt.count(done.snapshots_kept)} kept) and deleted {plural(done.files, "file")},{" "}
          {fmt.bytes(done.bytes_deleted)}.
        </p>
      )}
      <ErrorBox error={action.error}>
        <NeedsSuperUser error={action.error} />
      </ErrorBox>
    </form>
  );
}
