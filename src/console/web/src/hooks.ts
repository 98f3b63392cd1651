// Loading what a page shows, so that a late answer for a page the user left, or for an
// earlier request, never overwrites a newer one.
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";

export interface Resource<T> {
  data: T | undefined;  // the last good answer, kept while reloading or after a failure
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
}

export function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
}

// Calls `load` now and whenever `key` changes or reload() is called.
export function useResource<T>(load: () => Promise<T>, key: string): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [generation, setGeneration] = useState(0);
  const latest = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  // Both before the first paint rather than after it (useEffect waits for a frame): a
  // page's data is asked a frame sooner. In this order, and both layout effects: a reset
  // run after a fast answer would drop it.
  useLayoutEffect(() => {
    setData(undefined);
  }, [key]);

  useLayoutEffect(() => {
    const id = ++latest.current;
    setLoading(true);
    loadRef.current().then(
      (v) => {
        if (id !== latest.current) return;
        setData(v);
        setError(undefined);
        setLoading(false);
      },
      (e: unknown) => {
        if (id !== latest.current) return;
        setError(asApiError(e));
        setLoading(false);
      },
    );
    return () => {
      latest.current++;  // the page or the key went: ignore this answer
    };
  }, [key, generation]);

  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data, error, loading, reload };
}

export type Outcome<T> = { ok: true; value: T } | { ok: false };

// A form's submission: `busy` while it runs, its error shown beside the form until the
// next try.
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const alive = useRef(true);
  useEffect(
    () => () => {
      alive.current = false;
    },
    [],
  );
  // Runs `action`; its error is kept for the form to show.
  const run = useCallback(async <T>(action: () => Promise<T>): Promise<Outcome<T>> => {
    setBusy(true);
    setError(undefined);
    try {
      return { ok: true, value: await action() };
    } catch (e) {
      if (alive.current) setError(asApiError(e));
      return { ok: false };
    } finally {
      if (alive.current) setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

// Sets the document's title while the page is shown.
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = title === "" ? "sluice" : `${title} · sluice`;
  }, [title]);
}
