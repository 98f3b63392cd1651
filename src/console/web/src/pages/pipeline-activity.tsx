// A pipeline's activity (GET /api/v1/pipelines/{name}/history every 2 s while the tab is
// visible): its rates, errors, batch and flush latency and consumer lag over the last
// half hour as charts, its errors by phase, and its dead letters with their values shown
// as the message browser shows them.
import { Component } from "preact";
import { useMemo, useState } from "preact/hooks";
import { paths, request } from "../api";
import { Chart } from "../components/chart";
import { ErrorBox, Link, Loading } from "../components/ui";
import { usePolled } from "../components/use-polled";
import { EncodedValue } from "../components/value";
import * as fmt from "../format";
import { hrefs } from "../router";
import type { DeadLetter, PipelineHistory, PipelineSeriesName } from "../types";

const kPollMs = 2000;
// Dead letters shown before "Show all": a page of values is long.
const kFirstDeadLetters = 10;

// What each phase's errors are (src/pipeline/error_phase.h), in its order.
const kPhases: [string, string][] = [
  ["decode", "a message that is not JSON or does not fit the table"],
  ["handler", "the handler's SQL failed over a batch"],
  ["sink", "the sink refused a row, or its write or flush failed"],
  ["source", "the source reported an error"],
  ["commit", "an offset commit failed (the next one covers it)"],
  ["window", "a window could not take a row, or closing windows failed"],
  ["late", "a row for a window closed longer than allowed_lateness ago"],
];

type Series = (number | null)[];

const perSec = (v: number) => `${fmt.count(v)}/s`;
const ms = (v: number) => `${v < 1 ? v.toFixed(2) : v < 10 ? v.toFixed(1) : fmt.count(v)} ms`;
const toMs = (s: Series): Series => s.map((v) => (v === null ? null : v * 1000));
// A series the server left out (an older server) reads as gaps, not as a failed page.
const orGaps = (h: PipelineHistory, name: PipelineSeriesName): Series =>
  h.series?.[name] ?? h.time_ms.map(() => null);

export function PipelineActivity(props: { name: string }) {
  const history = usePolled(
    () => request<PipelineHistory>("GET", paths.pipelineHistory(props.name)),
    props.name,
    kPollMs,
  );
  const h = history.data;
  return (
    <>
      <section class="activity" aria-labelledby="activity">
        <h2 id="activity">Activity</h2>
        <ErrorBox error={history.error}>
          <span class="muted"> (trying again every 2 s)</span>
        </ErrorBox>
        <Loading when={!h && !history.error} />
        {h && <Charts history={h} />}
        {h && <ErrorsByPhase totals={h.errors_total} />}
      </section>
      {h && <DeadLetters letters={h.dead_letters} />}
    </>
  );
}

// The charts' data is rebuilt, and the charts redrawn, only when a new sample came.
function Charts(props: { history: PipelineHistory }) {
  const h = props.history;
  const n = h.time_ms.length;
  const signature = `${n}:${h.time_ms[n - 1] ?? ""}`;
  const d = useMemo(() => {
    const t = h.time_ms.map((x) => x / 1000);
    return {
      rates: [t, orGaps(h, "messages_in_per_sec"), orGaps(h, "rows_out_per_sec")],
      errors: [t, orGaps(h, "errors_per_sec")],
      latency: [
        t,
        toMs(orGaps(h, "batch_seconds_mean")),
        toMs(orGaps(h, "batch_seconds_p99")),
        toMs(orGaps(h, "flush_seconds_mean")),
        toMs(orGaps(h, "flush_seconds_p99")),
      ],
      lag: [t, orGaps(h, "consumer_lag")],
    } as Record<string, [number[], ...Series[]]>;
  }, [signature]);
  const last = (name: PipelineSeriesName) => orGaps(h, name)[n - 1] ?? null;
  const step = h.step_ms / 1000;
  return (
    <>
      <p class="muted small">
        Sampled every {fmt.count(step)} s while sluice runs and kept 30 minutes, across the
        pipeline's restarts. A gap: it was stopped, or no batch ran then.
      </p>
      {n > 0 && (
        <p class="activity-now">
          <span class="muted">Last {fmt.count(step)} s:</span>{" "}
          {fmt.count(last("messages_in_per_sec"))} messages/s in ·{" "}
          {fmt.count(last("rows_out_per_sec"))} rows/s out ·{" "}
          {fmt.byteRate(last("bytes_in_per_sec"))} in · {fmt.count(last("errors_per_sec"))}{" "}
          errors/s · lag {fmt.count(last("consumer_lag"))}
        </p>
      )}
      <div class="charts">
        <figure>
          <figcaption>Messages in and rows out per second</figcaption>
          <Chart
            label="Messages in and rows out per second, last 30 minutes"
            series={[
              { label: "messages in/s", color: "#2f80ed" },
              { label: "rows out/s", color: "#27ae60" },
            ]}
            data={d.rates}
            format={perSec}
          />
        </figure>
        <figure>
          <figcaption>Errors per second</figcaption>
          <Chart
            label="Errors per second, last 30 minutes"
            series={[{ label: "errors/s", color: "#d64545" }]}
            data={d.errors}
            format={perSec}
          />
        </figure>
        <figure>
          <figcaption>Batch and flush latency (ms)</figcaption>
          <Chart
            label="Batch and flush latency in ms, mean and 99th percentile, last 30 minutes"
            series={[
              { label: "batch mean", color: "#2f80ed" },
              { label: "batch p99", color: "#8e44ad" },
              { label: "flush mean", color: "#27ae60" },
              { label: "flush p99", color: "#e8833a" },
            ]}
            data={d.latency}
            format={ms}
          />
        </figure>
        <figure>
          <figcaption>Consumer lag (messages)</figcaption>
          <Chart
            label="Consumer lag in messages, last 30 minutes"
            series={[{ label: "lag", color: "#c29a00" }]}
            data={d.lag}
            format={(v) => fmt.count(v)}
          />
        </figure>
      </div>
    </>
  );
}

function ErrorsByPhase(props: { totals: Record<string, number> | undefined }) {
  const totals = props.totals ?? {};
  const known = new Set(kPhases.map(([p]) => p));
  const rows = [
    ...kPhases.map(([phase, what]) => ({ phase, what, n: totals[phase] ?? 0 })),
    ...Object.keys(totals)
      .filter((p) => !known.has(p))
      .sort()
      .map((phase) => ({ phase, what: "", n: totals[phase] })),
  ].filter((r) => r.n > 0);
  return (
    <>
      <h3 id="errors-by-phase">Errors by phase</h3>
      {rows.length === 0 ? (
        <p class="muted">No errors.</p>
      ) : (
        <table class="compact" aria-labelledby="errors-by-phase">
          <thead>
            <tr>
              <th scope="col">Phase</th>
              <th scope="col" class="num">Errors</th>
              <th scope="col">What it counts</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.phase}>
                <td>{r.phase}</td>
                <td class="num">{fmt.count(r.n)}</td>
                <td class="muted">{r.what}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function DeadLetters(props: { letters: DeadLetter[] | undefined }) {
  const [all, setAll] = useState(false);
  const letters = props.letters ?? [];
  const shown = all ? letters : letters.slice(0, kFirstDeadLetters);
  return (
    <section aria-labelledby="dead-letters">
      <h2 id="dead-letters">Dead letters</h2>
      <p class="muted small">
        The messages and rows the pipeline failed on, newest first: the last 50 since sluice
        started (what <code>on_error</code> then did with them is the pipeline's setting).
      </p>
      {letters.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <>
          <div class="scroll-x">
            <table class="messages dead-letters">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Phase</th>
                  <th scope="col">Error</th>
                  <th scope="col">Message</th>
                  <th scope="col">Value</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((l, i) => (
                  <DeadLetterRow key={`${l.time_ms}:${l.offset}:${i}`} l={l} />
                ))}
              </tbody>
            </table>
          </div>
          {letters.length > shown.length && (
            <button type="button" class="small" onClick={() => setAll(true)}>
              Show all {letters.length}
            </button>
          )}
        </>
      )}
    </section>
  );
}

// A row is drawn once: the answer every 2 s repeats the same dead letters, whose values
// would otherwise be parsed and laid out again each time.
class DeadLetterRow extends Component<{ l: DeadLetter }> {
  shouldComponentUpdate(next: { l: DeadLetter }) {
    const a = this.props.l;
    const b = next.l;
    return (
      a.time_ms !== b.time_ms ||
      a.error !== b.error ||
      a.offset !== b.offset ||
      a.value?.text !== b.value?.text
    );
  }
  render() {
    const l = this.props.l;
    const v = l.value;
    return (
      <tr>
        <td class="time">{fmt.time(l.time_ms)}</td>
        <td>{l.phase}</td>
        <td class="dead-error">{l.error}</td>
        <td>
          {l.topic === null ? (
            <span class="muted">–</span>
          ) : (
            <>
              <Link href={hrefs.topic(l.topic)}>{l.topic}</Link>
              <div class="muted small">
                {l.partition !== null && `partition ${l.partition}`}
                {l.partition !== null && l.offset !== null && " · "}
                {l.offset !== null && `offset ${l.offset}`}
              </div>
            </>
          )}
        </td>
        <td class="value">
          {v === null ? (
            <span class="muted">–</span>
          ) : (
            <>
              {/* A cut JSON value would not parse: shown as the text it is. */}
              <EncodedValue
                value={v.text}
                encoding={v.truncated && v.encoding === "json" ? "text" : v.encoding}
                label={`value of the dead letter of ${fmt.time(l.time_ms)}`}
              />
              {v.truncated && <span class="muted small">(cut short)</span>}
            </>
          )}
        </td>
      </tr>
    );
  }
}
