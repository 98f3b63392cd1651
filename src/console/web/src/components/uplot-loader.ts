// uPlot is fetched when a page first draws a chart (a chunk of its own, 50 KB): a page's
// first paint does not wait for it, and pages without charts never load it. A failed
// fetch (the server restarting) is tried again by the next chart rather than kept.
import type uPlot from "uplot";

let loading: Promise<typeof uPlot> | null = null;

export function loadUPlot(): Promise<typeof uPlot> {
  loading ??= import("uplot").then(
    (m) => m.default,
    (e: unknown) => {
      loading = null;
      throw e;
    },
  );
  return loading;
}
