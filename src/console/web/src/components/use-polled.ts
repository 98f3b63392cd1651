// An answer kept current by asking again every few seconds while the page is open and the
// tab is visible (a hidden tab asks nothing; shown again, it asks at once): the history
// charts of the pipeline and group pages. The overview's own loop does the same for its
// samples.
import { useEffect, useRef, useState } from "preact/hooks";
import { loginState, onLoginChange, type ApiError } from "../api";
import { asApiError } from "../hooks";

export interface Polled<T> {
  data: T | undefined;  // the last good answer, kept while an ask fails
  error: ApiError | undefined;  // the last ask's failure; cleared by the next answer
}

// Calls `load` now and every `periodMs` from the start of the last call, never two at
// once; starts afresh when `key` changes.
export function usePolled<T>(load: () => Promise<T>, key: string, periodMs: number): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const loadRef = useRef(load);
  loadRef.current = load;

  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, [key]);

  useEffect(() => {
    let stopped = false;
    let timer = 0;  // 0: no ask is scheduled
    let asking = false;
    const poll = async () => {
      timer = 0;
      // Hidden, or behind the login form: asked again when shown or logged in.
      if (document.hidden || loginState().asking !== null) return;
      asking = true;
      const started = performance.now();
      try {
        const v = await loadRef.current();
        if (!stopped) {
          setData(v);
          setError(undefined);
        }
      } catch (e) {
        if (!stopped) setError(asApiError(e));
      }
      asking = false;
      if (stopped) return;
      timer = window.setTimeout(poll, Math.max(0, periodMs - (performance.now() - started)));
    };
    const onVisibility = () => {
      if (!document.hidden && !asking && timer === 0) void poll();
    };
    document.addEventListener("visibilitychange", onVisibility);
    const unsubscribe = onLoginChange(onVisibility);
    void poll();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisibility);
      unsubscribe();
    };
  }, [key, periodMs]);

  return { data, error };
}
