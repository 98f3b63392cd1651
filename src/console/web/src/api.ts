// Requests to the console's API under /api/v1: JSON both ways, the proof against cross-site
// requests on every request (docs/design/0021, 0026 #6), the login's bearer token when the
// HTTP port asks for one (0026 #11), and errors as ApiError whatever the server, the network
// or a proxy in between answered.

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
  const sentWith = token;
  const headers = baseHeaders(sentWith);
  headers.Accept = opts.accept ?? "application/json";
  if (method !== "GET") headers["Content-Type"] = "application/json";
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
  if (res.status === 401) {
    // The Iceberg REST error body (its `code` is the number 401, not one of ours).
    const m = (parsed as { error?: { message?: unknown } } | undefined)?.error?.message;
    loginRefused(sentWith);
    const message = typeof m === "string" && m !== "" ? m : "log in to go on";
    throw new ApiError(401, "LOGIN_NEEDED", message);
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

// The headers every request of the page carries. X-Sluice-Request, on GETs too: without it
// the port's browser guard refuses a change (it is what another site's form or simple fetch
// cannot send), and with it a refusal carries no Basic challenge, which would make the
// browser open its own login dialog over the page's form.
function baseHeaders(bearer: string | null): Record<string, string> {
  const headers: Record<string, string> = { "X-Sluice-Request": "1" };
  if (bearer !== null) headers.Authorization = `Bearer ${bearer}`;
  return headers;
}

// The login (docs/design/0021, 0026 #11). The token lives in this variable only: not in
// localStorage, sessionStorage or a cookie, so another tab or a reload logs in again, and
// no request another site makes the browser send carries it. The password is never kept.
export interface LoginState {
  // Who is logged in; null before a login, after logging out, and once the token is refused.
  user: string | null;
  // Why the login form is shown; null: it is not (always so on a port that needs no login).
  // "login": nobody is logged in; "expired": the token was refused (expired, or ended by a
  // new password); "renew": the token runs out within a minute.
  asking: null | "login" | "expired" | "renew";
  // Who was logged in last, to fill in the form again.
  lastUser: string;
  // Bumped by a login that follows a refused request or a log out: what the page showed is
  // stale or failed, and the page loads again (app.tsx keys it by this).
  reloads: number;
}

let token: string | null = null;
let login: LoginState = { user: null, asking: null, lastUser: "", reloads: 0 };
// A request was refused, or the user logged out, since the last login.
let stale = false;
let renewTimer = 0;
const listeners = new Set<(s: LoginState) => void>();

export const loginState = (): LoginState => login;

// Calls `fn` with every change of the login state; returns what unsubscribes it.
export function onLoginChange(fn: (s: LoginState) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function setLogin(change: Partial<LoginState>) {
  login = { ...login, ...change };
  for (const fn of listeners) fn(login);
}

// A 401 to a request sent with `sentWith` (null: none). A refusal of an older token than the
// one now kept (a login came meanwhile) changes nothing; of the current one, it is dropped.
function loginRefused(sentWith: string | null) {
  if (sentWith !== token) return;
  stale = true;
  if (token !== null) {
    token = null;
    window.clearTimeout(renewTimer);
    setLogin({ user: null, asking: "expired" });
  } else if (login.asking === null) {
    setLogin({ asking: "login" });
  }
}

const kTokenPath = "/v1/oauth/tokens";
// How long before its token runs out the form asks to log in again (a tenth of the
// lifetime when that is shorter): the token keeps working meanwhile, so a login in time
// loses nothing on the page. One that comes too late is a refused request and the same
// form ("expired"), and the page then loads again.
const kRenewLeadMs = 60_000;
const kMaxTimerMs = 2 ** 31 - 1;  // setTimeout's limit (24.8 days): longer fires at once

// Asks the port for a token with the user's name and password (OAuth2's client credentials,
// design 0021) and keeps it. Throws an ApiError whose message is meant for the login form.
export async function logIn(user: string, password: string): Promise<void> {
  const form = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: user,
    client_secret: password,
  });
  let res: Response;
  try {
    res = await fetch(kTokenPath, {
      method: "POST",
      headers: {
        ...baseHeaders(null),
        Accept: "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: form.toString(),
      credentials: "same-origin",
    });
  } catch (e) {
    throw new ApiError(0, "NETWORK", `no answer from sluice (${String(e)})`);
  }
  const text = await res.text().catch(() => "");
  let parsed: Record<string, unknown> = {};
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === "object") parsed = v as Record<string, unknown>;
  } catch {
    // A refusal of the browser guard (text/plain) or a proxy's page: its first line below.
  }
  const { access_token, token_type, expires_in, error, error_description } = parsed;
  if (res.ok) {
    if (
      typeof access_token !== "string" ||
      access_token === "" ||
      String(token_type).toLowerCase() !== "bearer"
    ) {
      throw new ApiError(res.status, "BAD_RESPONSE", "the answer held no bearer token");
    }
    keepToken(user, access_token, typeof expires_in === "number" ? expires_in : null);
    return;
  }
  const code = typeof error === "string" ? error : `HTTP_${res.status}`;
  let message: string;
  if (res.status === 429) {
    const wait = Number.parseInt(res.headers.get("Retry-After") ?? "", 10);
    message = Number.isFinite(wait)
      ? `too many attempts, wait ${wait} s`
      : "too many attempts, wait a minute";
  } else if (code === "invalid_client") {
    // The server's words name OAuth's client_id and client_secret: the form's are these.
    message = "wrong user or password";
  } else if (typeof error_description === "string" && error_description !== "") {
    message = error_description;
  } else {
    message = text.trim().split("\n")[0]?.slice(0, 300) || `HTTP ${res.status}`;
  }
  throw new ApiError(res.status, code, message);
}

function keepToken(user: string, bearer: string, expiresInSeconds: number | null) {
  token = bearer;
  window.clearTimeout(renewTimer);
  if (expiresInSeconds !== null && expiresInSeconds > 0) {
    const lifetime = expiresInSeconds * 1000;
    askAt(bearer, Date.now() + lifetime - Math.min(kRenewLeadMs, lifetime / 10));
  }
  // Another user's page may show other things: loaded again too.
  const reloads = stale || user !== login.lastUser ? login.reloads + 1 : login.reloads;
  stale = false;
  setLogin({ user, asking: null, lastUser: user, reloads });
}

// Shows the form again at `at` (Date.now()'s clock) if `bearer` is still the token then.
// Checked against the clock when it fires: a wait past setTimeout's limit is waited in
// parts.
function askAt(bearer: string, at: number) {
  renewTimer = window.setTimeout(
    () => {
      if (token !== bearer) return;
      if (Date.now() < at) askAt(bearer, at);
      else setLogin({ asking: "renew" });
    },
    Math.min(Math.max(0, at - Date.now()), kMaxTimerMs),
  );
}

// Forgets the token and shows the form. The token itself stays valid until it expires (the
// port cannot end one token, design 0021), but nothing on this page holds it any more.
export function logOut(): void {
  token = null;
  stale = true;
  window.clearTimeout(renewTimer);
  setLogin({ user: null, asking: "login" });
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
