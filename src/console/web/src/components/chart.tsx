// A live line chart (uPlot on a canvas) over time, sized to its container. The page's
// numbers are also shown as text: the chart is for the shape of the last minutes.
import { useEffect, useRef } from "preact/hooks";
import type uPlot from "uplot";
import { loadUPlot } from "./uplot-loader";
import { useTheme } from "../theme";

export interface ChartSeries {
  label: string;
  color: string;  // the same in both themes: chosen to read on light and dark
}

export function Chart(props: {
  label: string;
  series: ChartSeries[];
  // [times in seconds, then one array per series]; null leaves a gap.
  data: [number[], ...(number | null)[][]];
  format: (v: number) => string;
  height?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useTheme();
  const format = useRef(props.format);
  format.current = props.format;
  const data = useRef(props.data);
  data.current = props.data;
  const height = props.height ?? 180;
  const seriesKey = props.series.map((s) => `${s.label}:${s.color}`).join();

  // (Re)built when the theme changes: axes and grid take the stylesheet's colours, which a
  // canvas cannot read from CSS by itself.
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue("--muted").trim() || "#888";
    const grid = css.getPropertyValue("--line").trim() || "#8884";
    const axis = (): uPlot.Axis => ({
      stroke: fg,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 },
    });
    let cancelled = false;
    let u: uPlot | null = null;
    let resize: ResizeObserver | null = null;
    void loadUPlot().then((UPlot) => {
      if (cancelled) return;
      const made = new UPlot(
        {
          width: Math.max(el.clientWidth, 200),
          height,
          series: [
            {},
            ...props.series.map((s) => ({
              label: s.label,
              stroke: s.color,
              width: 2,
              points: { show: false },
              value: (_: uPlot, v: number | null) => (v === null ? "–" : format.current(v)),
            })),
          ],
          axes: [
            axis(),
            {
              ...axis(),
              size: 80,
              values: (_: uPlot, splits: number[]) => splits.map((v) => format.current(v)),
            },
          ],
          scales: {
            // At least the last minute: with one or two samples uPlot would spread them
            // over years of axis.
            x: { time: true, range: (_u, min, max) => [Math.min(min, max - 60), max] },
            y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
          },
          legend: { live: true },
          cursor: { drag: { x: false, y: false } },
        },
        data.current as uPlot.AlignedData,
        el,
      );
      u = made;
      plot.current = made;
      resize = new ResizeObserver(() => {
        made.setSize({ width: Math.max(el.clientWidth, 200), height });
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
  }, [theme, seriesKey, height]);

  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);

  return <div class="chart" ref={box} role="img" aria-label={props.label} />;
}
