// Requests to the console's API under /api/v1: JSON both ways, the proof against cross-site
// requests on every change (docs/design/0021, 0026 #6), and errors as ApiError whatever the
// server, the network or a proxy in between answered.

export class ApiError extends Error {
  // `code` is the API's (TOPIC_ALREADY_EXISTS, NON_EMPTY_GROUP, ...), else HTTP_<status>,
  // or NETWORK when no answer came. `body`: the whole JSON answer of an API error, for
  // errors that carry more than a message (INVALID_PIPELINE's problems).
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

type Method = "GET" | "POST" | "PUT" | "DELETE";

// Sends a request and returns its parsed JSON body (undefined for 204).
export async function request<T>(method: Method, path: string, body?: unknown): Promise<T> {
  const res = await send(method, path, body);
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    throw new ApiError(res.status, "BAD_RESPONSE", "the answer was not JSON");
  }
  return parsed as T;
}

// Sends a request and returns the response of a success (2xx) unread, for answers that
// are not one JSON document: a stream of lines (POST /api/v1/sql), a file (its download).
// Anything else throws as request() does. `signal` aborts it (fetch then throws its
// AbortError as it is, not as an ApiError: the caller asked for it).
export async function send(
  method: Method,
  path: string,
  body?: unknown,
  opts: { accept?: string; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { Accept: opts.accept ?? "application/json" };
  if (method !== "GET") {
    // Without this header (and a JSON Content-Type) the port's browser guard refuses a
    // change: it is what another site's form or simple fetch cannot send.
    headers["X-Sluice-Request"] = "1";
    headers["Content-Type"] = "application/json";
  }
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      signal: opts.signal,
    });
  } catch (e) {
    if (opts.signal?.aborted) throw e;
    throw new ApiError(0, "NETWORK", `no answer from sluice (${String(e)})`);
  }
  if (res.ok) return res;
  const text = await res.text().catch(() => "");
  let parsed: unknown = undefined;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    // Not JSON: a refusal of the browser guard or a proxy's page; reported below.
  }
  throw toError(res.status, parsed, text);
}

function toError(status: number, parsed: unknown, text: string): ApiError {
  const err = (parsed as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (err && typeof err.code === "string") {
    return new ApiError(status, err.code, typeof err.message === "string" ? err.message : "", parsed);
  }
  const line = text.trim().split("\n")[0] ?? "";
  return new ApiError(status, `HTTP_${status}`, line.slice(0, 300) || `HTTP ${status}`);
}

// Paths of the API, with names percent-encoded (a topic may hold '.', a group id anything).
const enc = encodeURIComponent;
const withQuery = (path: string, q: URLSearchParams) => {
  const qs = q.toString();
  return qs === "" ? path : `${path}?${qs}`;
};
export const paths = {
  cluster: "/api/v1/cluster",
  overview: "/api/v1/overview",
  topics: (internal: boolean) => `/api/v1/topics${internal ? "?internal=true" : ""}`,
  createTopic: "/api/v1/topics",
  topic: (t: string) => `/api/v1/topics/${enc(t)}`,
  partitions: (t: string) => `/api/v1/topics/${enc(t)}/partitions`,
  configs: (t: string) => `/api/v1/topics/${enc(t)}/configs`,
  messages: (t: string, q: URLSearchParams) => withQuery(`/api/v1/topics/${enc(t)}/messages`, q),
  live: (t: string, q: URLSearchParams) => withQuery(`/api/v1/topics/${enc(t)}/messages/live`, q),
  produce: (t: string) => `/api/v1/topics/${enc(t)}/messages`,
  groups: "/api/v1/groups",
  group: (g: string) => `/api/v1/groups/${enc(g)}`,
  resetOffsets: (g: string) => `/api/v1/groups/${enc(g)}/reset-offsets`,
  groupHistory: (g: string) => `/api/v1/groups/${enc(g)}/history`,
  pipelines: "/api/v1/pipelines",
  pipeline: (p: string) => `/api/v1/pipelines/${enc(p)}`,
  restartPipeline: (p: string) => `/api/v1/pipelines/${enc(p)}/restart`,
  stopPipeline: (p: string) => `/api/v1/pipelines/${enc(p)}/stop`,
  startPipeline: (p: string) => `/api/v1/pipelines/${enc(p)}/start`,
  pipelineHistory: (p: string) => `/api/v1/pipelines/${enc(p)}/history`,
  validatePipeline: "/api/v1/pipelines/validate",
  previewPipeline: "/api/v1/pipelines/preview",
  sql: "/api/v1/sql",
  sqlQuery: (id: string) => `/api/v1/sql/${enc(id)}`,
  sqlDownload: "/api/v1/sql/download",
  sqlSchema: "/api/v1/sql/schema",
  tables: "/api/v1/tables",
  // `ns`: the namespace's levels joined by '.' (namespacePath), encoded as one segment.
  table: (ns: string, t: string) => `/api/v1/tables/${enc(ns)}/${enc(t)}`,
  tableFiles: (ns: string, t: string, snapshot: string | null) =>
    withQuery(
      `/api/v1/tables/${enc(ns)}/${enc(t)}/files`,
      new URLSearchParams(snapshot === null ? {} : { snapshot: String(snapshot) }),
    ),
  tableMaintenance: (ns: string, t: string) => `/api/v1/tables/${enc(ns)}/${enc(t)}/maintenance`,
};

// A table's namespace as its address names it: the levels joined by '.'.
export const namespacePath = (namespace: string[]) => namespace.join(".");
