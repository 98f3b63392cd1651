// The overview: the cluster, counts, and this broker's throughput as live charts, from
// GET /api/v1/overview every 2 s (docs/design/0026-console.md #8); the way to the Start
// page, prominent while the cluster has no topics.
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { paths, request, type ApiError } from "../api";
import { Chart } from "../components/chart";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { asApiError, useTitle } from "../hooks";
import type { Overview as OverviewData } from "../types";

const kPollMs = 2000;
const kWindowSec = 15 * 60;

interface Sample {
  t: number;  // seconds
  bytesIn: number | null;
  bytesOut: number | null;
  messagesIn: number | null;
}

// Kept for the life of the page, not of the view: back on the overview after a look at a
// topic, the last 15 minutes are still there (with a gap for the time away).
const samples: Sample[] = [];
let last: OverviewData | undefined;

function record(o: OverviewData): void {
  const t = o.time_ms / 1000;
  const prev = samples[samples.length - 1];
  if (prev && t <= prev.t) return;  // the same sample twice, or a clock stepped back
  if (prev && t - prev.t > (3 * kPollMs) / 1000) {
    // No polls meanwhile: a break in the lines rather than a straight line across.
    samples.push({ t: prev.t + kPollMs / 1000, bytesIn: null, bytesOut: null, messagesIn: null });
  }
  samples.push({
    t,
    bytesIn: o.bytes_in_per_sec,
    bytesOut: o.bytes_out_per_sec,
    messagesIn: o.messages_in_per_sec,
  });
  while (samples.length > 0 && samples[0].t < t - kWindowSec) samples.shift();
  last = o;
}

function usePolledOverview(): { data: OverviewData | undefined; error: ApiError | undefined } {
  const [data, setData] = useState(last);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  useEffect(() => {
    let stopped = false;
    let timer = 0;
    const poll = async () => {
      const started = performance.now();
      try {
        const o = await request<OverviewData>("GET", paths.overview);
        if (stopped) return;
        record(o);
        setData(o);
        setError(undefined);
      } catch (e) {
        if (stopped) return;
        setError(asApiError(e));
      }
      // Every 2 s from the start of the last request, never two at once.
      timer = window.setTimeout(poll, Math.max(0, kPollMs - (performance.now() - started)));
    };
    void poll();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, []);
  return { data, error };
}

export function Overview() {
  useTitle("Overview");
  const { data, error } = usePolledOverview();
  const ts = samples.map((s) => s.t);
  return (
    <section>
      <div class="title-row">
        <h1>Overview</h1>
        <Link href="/start" class="start-link">
          New here? Start →
        </Link>
      </div>
      {data && data.topics === 0 && (
        <div class="notice start-notice" role="status">
          <p>
            <strong>This cluster has no topics yet.</strong> The Start page walks you from
            nothing to a live result in about three minutes: a topic, messages arriving, the SQL
            of a pipeline tried on them, the pipeline running into a table, and a query of it.
          </p>
          <p>
            <Link href="/start" class="button primary">
              Start →
            </Link>
          </p>
        </div>
      )}
      <ErrorBox error={error}>
        <span class="muted"> (trying again every 2 s)</span>
      </ErrorBox>
      <Loading when={!data && !error} />
      {data && (
        <>
          <div class="cards">
            <Card label="Brokers" value={fmt.count(data.cluster.brokers.length)}>
              <ul class="plain">
                {[...data.cluster.brokers]
                  .sort((a, b) => a.node_id - b.node_id)
                  .map((b) => (
                    <li key={b.node_id}>
                      {b.node_id}: {b.host}:{b.port}
                      {b.node_id === data.cluster.controller_id ? " (controller)" : ""}
                    </li>
                  ))}
              </ul>
            </Card>
            <Card label="Topics" value={fmt.count(data.topics)}>
              <Link href="/topics">{fmt.count(data.partitions)} partitions</Link>
            </Card>
            <Card label="Consumer groups" value={fmt.count(data.groups)}>
              <Link href="/groups">see groups</Link>
            </Card>
            <Card
              label="Pipelines running"
              value={
                data.pipelines
                  ? `${fmt.count(data.pipelines.running)} / ${fmt.count(data.pipelines.total)}`
                  : "–"
              }
            />
            <Card label="In" value={fmt.byteRate(data.bytes_in_per_sec)} scope />
            <Card label="Out" value={fmt.byteRate(data.bytes_out_per_sec)} scope />
            <Card label="Messages in" value={`${fmt.count(data.messages_in_per_sec)}/s`} scope />
            <Card label="Disk" value={fmt.bytes(data.disk_bytes)} scope />
            <Card label="Memory (RSS)" value={fmt.bytes(data.memory_rss_bytes)} scope />
          </div>
          <p class="muted small">
            Cluster {data.cluster.cluster_id || "(no id)"}. Figures marked * are this broker's;
            rates are over the last 2 s. Charts show up to the last 15 minutes this page has
            seen.
          </p>
          <div class="charts">
            <figure>
              <figcaption>Throughput (bytes/s) *</figcaption>
              <Chart
                label="Bytes in and out per second, last 15 minutes"
                series={[
                  { label: "in", color: "#2f80ed" },
                  { label: "out", color: "#e8833a" },
                ]}
                data={[ts, samples.map((s) => s.bytesIn), samples.map((s) => s.bytesOut)]}
                format={fmt.byteRate}
              />
            </figure>
            <figure>
              <figcaption>Messages in per second *</figcaption>
              <Chart
                label="Messages in per second, last 15 minutes"
                series={[{ label: "messages/s", color: "#27ae60" }]}
                data={[ts, samples.map((s) => s.messagesIn)]}
                format={(v) => fmt.count(v)}
              />
            </figure>
          </div>
        </>
      )}
    </section>
  );
}

function Card(props: {
  label: string;
  value: string;
  scope?: boolean;  // this broker's figure, not the cluster's
  children?: ComponentChildren;
}) {
  return (
    <div class="card">
      <div class="label">
        {props.label}
        {props.scope ? " *" : ""}
      </div>
      <div class="value">{props.value}</div>
      {props.children}
    </div>
  );
}
