// One consumer group: its lag over time (GET .../history every 2 s), its members and their
// partitions, its committed offsets with lag, resetting them (a preview first, then
// Execute; docs/design/0026-console.md #3), and delete.
import { useMemo, useState } from "preact/hooks";
import { ApiError, paths, request } from "../api";
import { Chart, type ChartSeries } from "../components/chart";
import { ConfirmByName } from "../components/confirm";
import { ErrorBox, Link, Loading } from "../components/ui";
import { usePolled } from "../components/use-polled";
import * as fmt from "../format";
import { useAction, useResource, useTitle } from "../hooks";
import { hrefs, navigate } from "../router";
import type { Broker, Group as GroupData, GroupHistory, ResetOffsets } from "../types";

const kPollMs = 2000;
// More partitions than this and only the total is drawn: a chart of many lines reads as
// none.
const kMaxPartitionLines = 10;
// The total first, then a colour per partition; each reads on light and dark.
const kTotalColor = "#2f80ed";
const kPartitionColors = [
  "#e8833a",
  "#27ae60",
  "#8e44ad",
  "#d64545",
  "#16a2b8",
  "#c29a00",
  "#e84393",
  "#6c8ebf",
  "#7f8c8d",
  "#2ecc71",
];

export function Group(props: { id: string }) {
  useTitle(props.id);
  const group = useResource(() => request<GroupData>("GET", paths.group(props.id)), props.id);
  const [deleting, setDeleting] = useState(false);
  const g = group.data;
  return (
    <section>
      <p class="crumbs">
        <Link href="/groups">Consumer groups</Link> /
      </p>
      <div class="title-row">
        <h1>{props.id}</h1>
        <button type="button" onClick={group.reload} disabled={group.loading}>
          Refresh
        </button>
        <button type="button" class="danger" onClick={() => setDeleting(true)}>
          Delete group…
        </button>
      </div>
      <ErrorBox error={group.error} />
      <Loading when={group.loading && !g} />
      {g && (
        <>
          <dl class="facts">
            <div>
              <dt>State</dt>
              <dd>{g.state}</dd>
            </div>
            <div>
              <dt>Protocol</dt>
              <dd>
                {g.protocol || (g.simple ? "none (offsets only)" : "none now")}
              </dd>
            </div>
            <div>
              <dt>Coordinator</dt>
              <dd>{coordinator(g.coordinator)}</dd>
            </div>
            <div>
              <dt>Lag</dt>
              <dd>{fmt.count(g.offsets.reduce((sum, o) => sum + (o.lag ?? 0), 0))}</dd>
            </div>
          </dl>
          <LagOverTime id={props.id} />
          <Members group={g} />
          <Offsets group={g} />
          <Reset group={g} onChanged={group.reload} />
        </>
      )}
      {deleting && (
        <ConfirmByName
          what="group"
          name={props.id}
          consequence="Its committed offsets are deleted; its consumers would start over from their reset policy. Only a group without members can be deleted."
          onConfirm={() => request("DELETE", paths.group(props.id))}
          onDone={() => navigate("/groups")}
          onCancel={() => setDeleting(false)}
        />
      )}
    </section>
  );
}

function coordinator(c: GroupData["coordinator"]): string {
  if (c === null || c === undefined) return "–";
  if (typeof c === "number") return `broker ${c}`;
  const b = c as Broker;
  return `broker ${b.node_id} (${b.host}:${b.port})`;
}

// The server samples a group's lag from the first time its history is asked, and goes on
// while someone asked in the last 10 minutes: the chart grows from the page's opening.
function LagOverTime(props: { id: string }) {
  const history = usePolled(
    () => request<GroupHistory>("GET", paths.groupHistory(props.id)),
    props.id,
    kPollMs,
  );
  const h = history.data;
  const n = h?.time_ms.length ?? 0;
  const perPartition = h !== undefined && h.partitions.length <= kMaxPartitionLines;
  // Rebuilt, and the chart redrawn, only when a new sample came.
  const signature = `${n}:${h?.time_ms[n - 1] ?? ""}:${h?.partitions.length ?? 0}`;
  const chart = useMemo(() => {
    if (!h) return undefined;
    const parts = perPartition
      ? [...h.partitions].sort(
          (a, b) => fmt.compareText(a.topic, b.topic) || a.partition - b.partition,
        )
      : [];
    const series: ChartSeries[] = [
      { label: "total", color: kTotalColor },
      ...parts.map((p, i) => ({
        label: `${p.topic} [${p.partition}]`,
        color: kPartitionColors[i % kPartitionColors.length],
      })),
    ];
    const data: [number[], ...(number | null)[][]] = [
      h.time_ms.map((t) => t / 1000),
      h.total_lag,
      ...parts.map((p) => p.lag),
    ];
    return { series, data };
  }, [signature]);
  const latest = h && n > 0 ? (h.total_lag[n - 1] ?? null) : null;
  return (
    <section aria-labelledby="lag-over-time">
      <h2 id="lag-over-time">Lag over time</h2>
      <p class="muted small">
        Lag history starts when a page of this group is first opened; it is sampled every{" "}
        {fmt.count((h?.step_ms ?? kPollMs) / 1000)} s while someone looks and kept 30 minutes.
        {h && !perPartition &&
          ` The group has ${h.partitions.length} partitions: only their total is drawn.`}
      </p>
      <ErrorBox error={history.error}>
        <span class="muted"> (trying again every 2 s)</span>
      </ErrorBox>
      <Loading when={!h && !history.error} />
      {h && n === 0 && <p class="muted">No sample yet: the first comes within seconds.</p>}
      {chart && n > 0 && (
        <figure>
          <figcaption>
            Lag (messages)
            {latest !== null && <span class="muted"> · now {fmt.count(latest)}</span>}
          </figcaption>
          <Chart
            label={
              `Lag of group ${props.id} over time, total` +
              (perPartition ? " and per partition" : "")
            }
            series={chart.series}
            data={chart.data}
            format={(v) => fmt.count(v)}
          />
        </figure>
      )}
    </section>
  );
}

function Members(props: { group: GroupData }) {
  const members = props.group.members;
  return (
    <section aria-labelledby="members">
      <h2 id="members">Members ({members.length})</h2>
      {members.length === 0 ? (
        <p class="muted">No members: nothing consumes with this group now.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Member</th>
              <th scope="col">Client</th>
              <th scope="col">Host</th>
              <th scope="col">Partitions</th>
            </tr>
          </thead>
          <tbody>
            {members.map((m) => (
              <tr key={m.member_id}>
                <td>
                  <code>{m.member_id}</code>
                </td>
                <td>{m.client_id}</td>
                <td>{m.host}</td>
                <td>
                  {m.assignments.length === 0 ? (
                    <span class="muted">none</span>
                  ) : (
                    m.assignments.map((a) => (
                      <div key={a.topic}>
                        <Link href={hrefs.topic(a.topic)}>{a.topic}</Link>:{" "}
                        {[...a.partitions].sort((x, y) => x - y).join(", ")}
                      </div>
                    ))
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Offsets(props: { group: GroupData }) {
  const offsets = [...props.group.offsets].sort(
    (a, b) => fmt.compareText(a.topic, b.topic) || a.partition - b.partition,
  );
  return (
    <section aria-labelledby="offsets">
      <h2 id="offsets">Committed offsets</h2>
      {offsets.length === 0 ? (
        <p class="muted">The group has committed no offsets.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Topic</th>
              <th scope="col" class="num">Partition</th>
              <th scope="col" class="num">Offset</th>
              <th scope="col" class="num">High</th>
              <th scope="col" class="num">Lag</th>
            </tr>
          </thead>
          <tbody>
            {offsets.map((o) => (
              <tr key={`${o.topic}:${o.partition}`}>
                <td>
                  <Link href={hrefs.topic(o.topic)}>{o.topic}</Link>
                </td>
                <td class="num">{o.partition}</td>
                <td class="num">{fmt.count(o.offset)}</td>
                <td class="num">{fmt.count(o.high)}</td>
                <td class="num">{fmt.count(o.lag)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

type Target = "earliest" | "latest" | "offset" | "timestamp";

interface ResetRequest {
  topic: string;
  partitions?: number[];
  to: Target;
  offset?: number;
  timestamp?: number;
}

// Reset offsets: the form asks for a preview (dry_run); Execute sends the same request for
// real. Changing the form drops the preview, so what runs is what was shown.
function Reset(props: { group: GroupData; onChanged: () => void }) {
  const topics = [...new Set(props.group.offsets.map((o) => o.topic))].sort();
  const [topic, setTopic] = useState(topics[0] ?? "");
  const [partitions, setPartitions] = useState("");
  const [to, setTo] = useState<Target>("earliest");
  const [offset, setOffset] = useState("");
  const [time, setTime] = useState("");
  const [preview, setPreview] = useState<{ req: ResetRequest; result: ResetOffsets } | null>(null);
  const [executed, setExecuted] = useState<ResetOffsets | null>(null);
  const action = useAction();
  const changed = <T,>(set: (v: T) => void) => (v: T) => {
    set(v);
    setPreview(null);
    setExecuted(null);
  };

  const build = (): ResetRequest => {
    const req: ResetRequest = { topic: topic.trim(), to };
    if (partitions.trim() !== "") {
      const list = fmt.partitionList(partitions);
      if (list === null) {
        throw new ApiError(0, "INVALID_REQUEST", "partitions: a list like 0, 1, 4-6");
      }
      req.partitions = list;
    }
    if (to === "offset") req.offset = Number(offset);
    if (to === "timestamp") {
      const ms = fmt.fromLocalInput(time);
      if (ms === null) throw new ApiError(0, "INVALID_REQUEST", "choose a date and time");
      req.timestamp = ms;
    }
    return req;
  };
  const previewIt = async (e: Event) => {
    e.preventDefault();
    setExecuted(null);
    const done = await action.run(async () => {
      const req = build();
      const result = await request<ResetOffsets>("POST", paths.resetOffsets(props.group.group_id), {
        ...req,
        dry_run: true,
      });
      return { req, result };
    });
    setPreview(done.ok ? done.value : null);
  };
  const execute = async () => {
    if (!preview) return;
    const done = await action.run(() =>
      request<ResetOffsets>("POST", paths.resetOffsets(props.group.group_id), {
        ...preview.req,
        dry_run: false,
      }),
    );
    if (done.ok) {
      setPreview(null);
      setExecuted(done.value);
      props.onChanged();
    }
  };

  const notEmpty = action.error?.code === "NON_EMPTY_GROUP";
  return (
    <section aria-labelledby="reset">
      <h2 id="reset">Reset offsets</h2>
      <form class="panel" onSubmit={previewIt}>
        <div class="fields">
          <label>
            Topic
            <input
              required
              list="reset-topics"
              value={topic}
              spellcheck={false}
              onInput={(e) => changed(setTopic)(e.currentTarget.value)}
            />
            <datalist id="reset-topics">
              {topics.map((t) => (
                <option key={t} value={t} />
              ))}
            </datalist>
          </label>
          <label>
            Partitions
            <input
              placeholder="all"
              value={partitions}
              onInput={(e) => changed(setPartitions)(e.currentTarget.value)}
            />
          </label>
          <label>
            To
            <select
              value={to}
              onChange={(e) => changed(setTo)(e.currentTarget.value as Target)}
            >
              <option value="earliest">the earliest offset</option>
              <option value="latest">the latest offset</option>
              <option value="timestamp">a time</option>
              <option value="offset">an offset</option>
            </select>
          </label>
          {to === "offset" && (
            <label>
              Offset
              <input
                type="number"
                min={0}
                required
                value={offset}
                onInput={(e) => changed(setOffset)(e.currentTarget.value)}
              />
            </label>
          )}
          {to === "timestamp" && (
            <label>
              Time (local)
              <input
                type="datetime-local"
                step={1}
                required
                value={time}
                onInput={(e) => changed(setTime)(e.currentTarget.value)}
              />
            </label>
          )}
        </div>
        <div class="buttons">
          <button type="submit" disabled={action.busy}>
            Preview
          </button>
        </div>
        <ErrorBox error={action.error}>
          {notEmpty && (
            <p>
              The group has active members ({props.group.members.length} when this page last
              looked). Offsets can only be reset while nothing consumes with the group: stop its
              consumers, then try again. Nothing was changed.
            </p>
          )}
        </ErrorBox>
      </form>
      {preview && (
        <div class="panel" aria-live="polite">
          <h3>Preview: nothing has changed yet</h3>
          <ResetTable result={preview.result} />
          <div class="buttons">
            <button type="button" class="primary" disabled={action.busy} onClick={execute}>
              {action.busy ? "Resetting…" : "Execute"}
            </button>
            <button type="button" onClick={() => setPreview(null)}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {executed && (
        <div class="panel" role="status">
          <p class="ok">Offsets reset.</p>
          <ResetTable result={executed} />
        </div>
      )}
    </section>
  );
}

function ResetTable(props: { result: ResetOffsets }) {
  const rows = [...props.result.offsets].sort(
    (a, b) => fmt.compareText(a.topic, b.topic) || a.partition - b.partition,
  );
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Topic</th>
          <th scope="col" class="num">Partition</th>
          <th scope="col" class="num">From</th>
          <th scope="col" class="num">To</th>
          <th scope="col" class="num">Change</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={`${r.topic}:${r.partition}`}>
            <td>{r.topic}</td>
            <td class="num">{r.partition}</td>
            <td class="num">{r.previous === null ? "none" : fmt.count(r.previous)}</td>
            <td class="num">{fmt.count(r.offset)}</td>
            <td class="num">
              {r.previous === null ? "" : signed(r.offset - r.previous)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function signed(n: number): string {
  return n > 0 ? `+${fmt.count(n)}` : fmt.count(n);
}
