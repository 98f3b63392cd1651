// A query's result as a chart (uPlot on a canvas): x is the first column, y every numeric
// column after it; a result whose only numeric column is the first charts it over the row
// number. x reads as numbers, as times (a date or timestamp column), or else as labels
// spaced evenly in the rows' order.
import { useEffect, useMemo, useRef } from "preact/hooks";
import type uPlot from "uplot";
import { loadUPlot } from "./uplot-loader";
import * as fmt from "../format";
import { useTheme } from "../theme";
import type { SqlColumn, SqlValue } from "../types";

export type ChartKind = "line" | "bar";

// Charted rows at most: more draws slowly and shows no more on a screen's width.
export const kChartRows = 100_000;
const kHeightPx = 300;
// Chosen to read on light and dark backgrounds.
const kColors = ["#2f80ed", "#e8833a", "#27ae60", "#9b51e0", "#eb5757", "#00a3a3"];

interface Plan {
  x: number | null;  // the column of x; null: the row number
  ys: number[];
}

// Which columns a chart of this result draws; null when none is numeric.
export function chartPlan(columns: SqlColumn[]): Plan | null {
  const ys = columns.flatMap((c, i) => (i > 0 && c.numeric ? [i] : []));
  if (ys.length > 0) return { x: 0, ys };
  if (columns[0]?.numeric) return { x: null, ys: [0] };
  return null;
}

type XMode = "number" | "time" | "row" | "label";

interface Built {
  mode: XMode;
  data: uPlot.AlignedData;
  labels: string[];  // of "label" x, by row
  halfStep: number;  // half the mean distance of x values: room for the outer bars
}

export function ResultChart(props: {
  columns: SqlColumn[];
  rows: SqlValue[][];  // grows in place while the query runs
  count: number;  // rows.length when rendered
  kind: ChartKind;
}) {
  const { columns, rows, count, kind } = props;
  const plan = useMemo(() => chartPlan(columns), [columns]);
  const built = useMemo(
    () => (plan ? build(columns, rows, Math.min(count, kChartRows), plan) : null),
    [columns, rows, count, plan],
  );
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useTheme();
  const current = useRef(built);
  current.current = built;
  const mode = built?.mode;
  const seriesKey = plan ? plan.ys.join() : "";

  // (Re)built when the theme, the kind or the x's reading changes: axes take the
  // stylesheet's colours, which a canvas cannot read from CSS by itself.
  useEffect(() => {
    const el = box.current;
    const b = current.current;
    if (!el || !plan || !b) return;
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue("--muted").trim() || "#888";
    const grid = css.getPropertyValue("--line").trim() || "#8884";
    const axis = (): uPlot.Axis => ({
      stroke: fg,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 },
    });
    const label = (v: number) => current.current?.labels[Math.round(v)] ?? "";
    const xName = plan.x === null ? "row" : columns[plan.x].name;
    let cancelled = false;
    let u: uPlot | null = null;
    let resize: ResizeObserver | null = null;
    void loadUPlot().then((UPlot) => {
      if (cancelled) return;
      const bars = kind === "bar" ? UPlot.paths.bars?.({ size: [0.8, 64] }) : undefined;
      const made = new UPlot(
        {
          width: Math.max(el.clientWidth, 200),
          height: kHeightPx,
          series: [
            {
              label: xName,
              value:
                b.mode === "label"
                  ? (_u: uPlot, v: number | null) => (v === null ? "–" : label(v))
                  : undefined,
            },
            ...plan.ys.map((y, i) => {
              const color = kColors[i % kColors.length];
              return {
                label: columns[y].name,
                stroke: color,
                width: kind === "bar" ? 1 : 2,
                fill: kind === "bar" ? `${color}99` : undefined,
                paths: bars,
                points: { show: false },
              };
            }),
          ],
          axes: [
            b.mode === "label"
              ? {
                  ...axis(),
                  values: (_u: uPlot, splits: number[]) =>
                    splits.map((v) => (Number.isInteger(v) ? label(v) : "")),
                }
              : axis(),
            { ...axis(), size: 70 },
          ],
          scales: {
            x: {
              time: b.mode === "time",
              range: (_u, min, max) => {
                const pad = kind === "bar" ? (current.current?.halfStep ?? 0.5) : 0;
                return min === max ? [min - 1, max + 1] : [min - pad, max + pad];
              },
            },
            // Bars grow from zero.
            y:
              kind === "bar"
                ? { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.05 : 1] }
                : {},
          },
          legend: { live: true },
          cursor: { drag: { x: true, y: false } },
        },
        b.data,
        el,
      );
      u = made;
      plot.current = made;
      resize = new ResizeObserver(() => {
        made.setSize({ width: Math.max(el.clientWidth, 200), height: kHeightPx });
      });
      resize.observe(el);
    }, (e: unknown) => {
      // uPlot's chunk did not load (the server restarting): said in the chart's place; the
      // next chart tries again (uplot-loader).
      if (!cancelled) el.textContent = `The chart could not load: ${String(e)}`;
    });
    return () => {
      cancelled = true;
      resize?.disconnect();
      u?.destroy();
      plot.current = null;
    };
  }, [theme, kind, mode, seriesKey, columns]);

  useEffect(() => {
    if (built) plot.current?.setData(built.data);
  }, [built]);

  if (!plan || !built) return null;
  const ys = plan.ys.map((y) => columns[y].name).join(", ");
  const label =
    `${kind === "bar" ? "Bar" : "Line"} chart of ${ys} ` +
    `by ${plan.x === null ? "row number" : columns[plan.x].name}`;
  return (
    <figure class="result-chart">
      <figcaption class="sr-only">{label}</figcaption>
      <div class="chart" ref={box} role="img" aria-label={label} data-testid="result-chart" />
      {count > kChartRows && (
        <p class="muted small">The first {fmt.count(kChartRows)} rows are charted.</p>
      )}
    </figure>
  );
}

const number = (v: SqlValue | undefined): number | null => {
  if (typeof v === "number") return v;
  if (v === null || v === undefined || v.trim() === "") return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
};

// Postgres's text of a date or timestamp ("2026-12-01 14:03:59.12+00") as seconds; null
// when it does not read as one.
function seconds(v: SqlValue | undefined): number | null {
  if (typeof v !== "string") return null;
  const iso = v.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms / 1000;
}

function build(columns: SqlColumn[], rows: SqlValue[][], n: number, plan: Plan): Built {
  const xs: number[] = [];
  const ys: (number | null)[][] = plan.ys.map(() => []);
  const labels: string[] = [];
  const xc = plan.x;
  let mode: XMode = "row";
  if (xc !== null) {
    const c = columns[xc];
    const times =
      /^(date|timestamp)/i.test(c.type) &&
      rows.slice(0, n).every((r) => r[xc] === null || seconds(r[xc]) !== null);
    mode = c.numeric ? "number" : times ? "time" : "label";
  }
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    let x: number | null;
    if (xc === null) x = i + 1;
    else if (mode === "label") {
      x = labels.length;
      const v = row[xc];
      labels.push(v === null ? "NULL" : String(v));
    } else x = mode === "number" ? number(row[xc]) : seconds(row[xc]);
    if (x === null) continue;  // a row without an x has no place on the chart
    xs.push(x);
    plan.ys.forEach((y, j) => ys[j].push(number(row[y])));
  }
  const span = xs.length > 1 ? Math.abs(xs[xs.length - 1] - xs[0]) / (xs.length - 1) : 1;
  return { mode, data: [xs, ...ys] as uPlot.AlignedData, labels, halfStep: (span || 1) / 2 };
}
