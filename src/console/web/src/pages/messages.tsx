// A topic's message browser: read from one partition or all, from an offset or a time,
// newest or oldest first; or follow new messages live over server-sent events without
// freezing the page (at most kMaxRows rows, DOM updates batched per animation frame).
import { Component } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, paths, request, send } from "../api";
import { EncodedValue } from "../components/value";
import { ErrorBox } from "../components/ui";
import * as fmt from "../format";
import { asApiError, useAction } from "../hooks";
import type { FramedSchema, LiveEvent, Message, Messages } from "../types";

const kMaxRows = 1000;
// While following: the newest rows kept, and how often they are redrawn. At 10K messages a
// second nobody reads more, and redrawing a thousand rows five times a second held the main
// thread for most of a second at a time (`sluice bench console`).
const kLiveRows = 100;
const kLiveEveryMs = 250;
// How long a broken live stream waits to be asked for again (an EventSource's default).
const kRetryMs = 3000;

type Seek = "end" | "offset" | "time";

export function MessageBrowser(props: { topic: string; partitions: number }) {
  const [partition, setPartition] = useState("all");
  const [seek, setSeek] = useState<Seek>("end");
  const [offset, setOffset] = useState("");
  const [time, setTime] = useState("");
  const [order, setOrder] = useState<"newest" | "oldest">("newest");
  const [limit, setLimit] = useState("50");
  const [rows, setRows] = useState<Message[]>([]);
  const [next, setNext] = useState<Record<string, number>>({});
  const [loaded, setLoaded] = useState(false);
  const [live, setLive] = useState(false);
  const action = useAction();

  const load = async (from?: number) => {
    const q = new URLSearchParams();
    if (partition !== "all") q.set("partition", partition);
    if (from !== undefined) {
      q.set("offset", String(from));
    } else if (seek === "offset") {
      q.set("offset", offset);
    } else if (seek === "time") {
      const ms = fmt.fromLocalInput(time);
      if (ms === null) {
        action.setError(new ApiError(0, "INVALID_REQUEST", "choose a date and time to read from"));
        return;
      }
      q.set("timestamp", String(ms));
    } else if (order === "oldest") {
      q.set("start", "oldest");  // the log's first records, not the last ones reversed
    }
    q.set("order", order);
    q.set("limit", limit);
    setLive(false);
    const done = await action.run(() => request<Messages>("GET", paths.messages(props.topic, q)));
    if (done.ok) {
      setRows(done.value.messages.slice(0, kMaxRows));
      setNext(done.value.next ?? {});
      setLoaded(true);
    }
  };

  // The newest messages when the topic opens.
  useEffect(() => {
    void load();
  }, []);

  const continueAt = partition === "all" ? undefined : next[partition];
  const submit = (e: Event) => {
    e.preventDefault();
    void load();
  };
  const partitionChoices = Array.from({ length: props.partitions }, (_, i) => i);

  return (
    <section aria-labelledby="messages">
      <h2 id="messages">Messages</h2>
      <form class="panel browse" onSubmit={submit}>
        <div class="fields">
          <label>
            Partition
            <select value={partition} onChange={(e) => setPartition(e.currentTarget.value)}>
              <option value="all">all</option>
              {partitionChoices.map((p) => (
                <option key={p} value={String(p)}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <label>
            From
            <select value={seek} onChange={(e) => setSeek(e.currentTarget.value as Seek)}>
              <option value="end">the end (newest) or start (oldest)</option>
              <option value="offset">an offset</option>
              <option value="time">a time</option>
            </select>
          </label>
          {seek === "offset" && (
            <label>
              Offset
              <input
                type="number"
                min={0}
                required
                value={offset}
                onInput={(e) => setOffset(e.currentTarget.value)}
              />
            </label>
          )}
          {seek === "time" && (
            <label>
              Time (local)
              <input
                type="datetime-local"
                step={1}
                required
                value={time}
                onInput={(e) => setTime(e.currentTarget.value)}
              />
            </label>
          )}
          <label>
            Order
            <select
              value={order}
              onChange={(e) => setOrder(e.currentTarget.value as "newest" | "oldest")}
            >
              <option value="newest">newest first</option>
              <option value="oldest">oldest first</option>
            </select>
          </label>
          <label>
            Limit
            <input
              type="number"
              min={1}
              max={1000}
              required
              value={limit}
              onInput={(e) => setLimit(e.currentTarget.value)}
            />
          </label>
        </div>
        <div class="buttons">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? "Reading…" : "Read"}
          </button>
          {continueAt !== undefined && !live && (
            <button type="button" disabled={action.busy} onClick={() => void load(continueAt)}>
              Continue at offset {continueAt}
            </button>
          )}
          <button type="button" aria-pressed={live} onClick={() => setLive(!live)}>
            {live ? "Stop following" : "Follow live"}
          </button>
        </div>
        <ErrorBox error={action.error} />
      </form>
      {live && (
        <LiveFeed
          topic={props.topic}
          partition={partition}
          onMessages={(batch) => setRows((prev) => [...batch, ...prev].slice(0, kLiveRows))}
          onStarted={() => setRows([])}
        />
      )}
      <MessageTable rows={rows} empty={loaded || live ? "No messages." : ""} />
    </section>
  );
}

// Follows new messages while mounted: one stream of server-sent events, whose batches are
// handed on at most once per kLiveEveryMs (in an animation frame), newest first, the newest
// kLiveRows. Read with fetch rather than an EventSource, which cannot send the login's
// Authorization header; it behaves as an EventSource would: a refusal (not 200: the topic
// went, a login, 429 past the streams allowed at once) ends it, and a stream that breaks or
// ends is asked for again after kRetryMs.
function LiveFeed(props: {
  topic: string;
  partition: string;
  onMessages: (newestFirst: Message[]) => void;
  onStarted: () => void;
}) {
  const [state, setState] = useState<"connecting" | "open" | "reconnecting">("connecting");
  const [error, setError] = useState<ApiError | undefined>(undefined);
  // Why the last stream ended, when the server said (its `error` event).
  const [lost, setLost] = useState("");
  const onMessages = useRef(props.onMessages);
  onMessages.current = props.onMessages;

  useEffect(() => {
    props.onStarted();
    const q = new URLSearchParams();
    if (props.partition !== "all") q.set("partition", props.partition);
    const url = paths.live(props.topic, q);
    const controller = new AbortController();
    const signal = controller.signal;
    let pending: Message[] = [];
    let frame = 0;
    let timer = 0;
    let last = 0;
    let retry = 0;
    const flush = () => {
      frame = 0;
      last = performance.now();
      const batch = pending;
      pending = [];
      batch.sort((a, b) => b.timestamp - a.timestamp || b.offset - a.offset);
      onMessages.current(batch);
    };
    const onEvent = (name: string, data: string) => {
      if (name === "error") {
        // The server's last word before it closes the stream (its consumer failed).
        try {
          const m = (JSON.parse(data) as { message?: unknown }).message;
          if (typeof m === "string") setLost(m);
        } catch {
          // Said nothing readable: the usual words are shown.
        }
        return;
      }
      if (name !== "messages") return;
      let batch: Message[];
      try {
        batch = (JSON.parse(data) as LiveEvent).messages;
      } catch {
        return;
      }
      // Only what could be shown is kept (a hidden tab runs no animation frames).
      pending = pending.concat(batch.slice(Math.max(0, batch.length - kLiveRows)));
      if (pending.length > kLiveRows) pending = pending.slice(pending.length - kLiveRows);
      if (frame !== 0 || timer !== 0) return;
      const wait = Math.max(0, last + kLiveEveryMs - performance.now());
      timer = window.setTimeout(() => {
        timer = 0;
        frame = requestAnimationFrame(flush);
      }, wait);
    };
    // The stream's answer; null when none came (asked again, as an EventSource does).
    // Throws a refusal, and fetch's AbortError once stopped.
    const connect = async (): Promise<Response | null> => {
      try {
        const res = await send("GET", url, undefined, { accept: "text/event-stream", signal });
        const type = res.headers.get("Content-Type") ?? "";
        if (!type.toLowerCase().startsWith("text/event-stream")) {
          void res.body?.cancel();
          const what = `the answer was ${type || "untyped"}, not an event stream`;
          throw new ApiError(res.status, "BAD_RESPONSE", what);
        }
        return res;
      } catch (e) {
        if (!signal.aborted && e instanceof ApiError && e.code === "NETWORK") return null;
        throw e;
      }
    };
    const follow = async () => {
      for (;;) {
        let res: Response | null;
        try {
          res = await connect();
        } catch (e) {
          // Refused: not asked again (a 401 has brought the login form).
          if (!signal.aborted) setError(asApiError(e));
          return;
        }
        if (res) {
          setState("open");
          setLost("");
          try {
            await readEvents(res.body, onEvent);
          } catch {
            // Broken off: asked for again below, as one that ended.
          }
        }
        if (signal.aborted) return;
        setState("reconnecting");
        await new Promise((resolve) => {
          retry = window.setTimeout(resolve, kRetryMs);
        });
        if (signal.aborted) return;
      }
    };
    void follow();
    return () => {
      controller.abort();
      window.clearTimeout(retry);
      if (frame !== 0) cancelAnimationFrame(frame);
      window.clearTimeout(timer);
    };
  }, [props.topic, props.partition]);

  return (
    <div class="live" role="status">
      {error ? (
        <ErrorBox error={error}>
          {error.code !== "LOGIN_NEEDED" && <p>Stop following and follow again to retry.</p>}
        </ErrorBox>
      ) : (
        <p>
          <span class={`dot ${state}`} aria-hidden="true" />
          {state === "open"
            ? `Following new messages; the newest ${fmt.count(kLiveRows)} are shown.`
            : state === "connecting"
              ? "Connecting…"
              : `Connection lost${lost ? ` (${lost})` : ""}; reconnecting…`}
        </p>
      )}
    </div>
  );
}

// Calls `onEvent` with each event of a server-sent event stream as it arrives, until the
// stream ends (https://html.spec.whatwg.org/multipage/server-sent-events.html): events end
// at a blank line; `event: NAME` names one ("message" when unnamed); its `data:` lines are
// joined with "\n"; a line starting with ':' is a comment (the server's keep-alive); `id`
// and `retry` are not read (the API sends neither); an event without data, or cut off by
// the end, is dropped. Only a new chunk is split, so a long line that comes in many chunks
// (a batch of large messages) costs no more than a short one.
async function readEvents(
  body: ReadableStream<Uint8Array> | null,
  onEvent: (name: string, data: string) => void,
) {
  if (!body) return;
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let partial: string[] = [];  // the line being received, in chunks
  let name = "";
  let data: string[] = [];
  const onLine = (line: string) => {
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line === "") {
      if (data.length > 0) onEvent(name === "" ? "message" : name, data.join("\n"));
      name = "";
      data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const lines = decoder.decode(value, { stream: true }).split("\n");
    if (lines.length === 1) {
      partial.push(lines[0]!);
      continue;
    }
    onLine(partial.join("") + lines[0]!);
    for (let i = 1; i < lines.length - 1; i++) onLine(lines[i]!);
    partial = [lines[lines.length - 1]!];
  }
}

export function MessageTable(props: { rows: Message[]; empty: string }) {
  if (props.rows.length === 0) return props.empty ? <p class="muted">{props.empty}</p> : null;
  return (
    <table class="messages">
      <thead>
        <tr>
          <th scope="col" class="num">Partition</th>
          <th scope="col" class="num">Offset</th>
          <th scope="col">Time</th>
          <th scope="col">Key</th>
          <th scope="col">Value</th>
          <th scope="col">Headers</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((m) => (
          <MessageRow key={`${m.partition}:${m.offset}`} m={m} />
        ))}
      </tbody>
    </table>
  );
}

// A row is drawn once: a message never changes, so rows already on the page are skipped
// when new ones arrive.
class MessageRow extends Component<{ m: Message }> {
  shouldComponentUpdate(next: { m: Message }) {
    return next.m !== this.props.m;
  }
  render() {
    const m = this.props.m;
    const where = `partition ${m.partition} offset ${m.offset}`;
    return (
      <tr>
        <td class="num">{m.partition}</td>
        <td class="num">{m.offset}</td>
        <td class="time">{fmt.time(m.timestamp)}</td>
        <td class="key">
          <EncodedValue
            value={m.key}
            encoding={m.key_encoding}
            truncated={m.key_truncated}
            label={`key at ${where}`}
          />
          <SchemaNote schema={m.key_schema} error={m.key_schema_error} />
        </td>
        <td class="value">
          <EncodedValue
            value={m.value}
            encoding={m.value_encoding}
            truncated={m.value_truncated}
            label={`value at ${where}`}
          />
          <SchemaNote schema={m.value_schema} error={m.value_schema_error} />
        </td>
        <td class="headers">
          {m.headers.length > 0 && (
            <dl>
              {m.headers.map((h, i) => (
                <div key={i}>
                  <dt>{h.key}</dt>
                  <dd>
                    <EncodedValue
                      value={h.value}
                      encoding={h.value_encoding}
                      label={`header ${h.key}`}
                    />
                  </dd>
                </div>
              ))}
            </dl>
          )}
        </td>
      </tr>
    );
  }
}

const kFormatNames = { avro: "Avro", protobuf: "Protobuf", json: "JSON Schema" } as const;

// Which registered schema decoded the bytes shown, or why framed bytes were not decoded.
function SchemaNote(props: { schema?: FramedSchema; error?: string }) {
  const { schema, error } = props;
  if (schema) {
    return (
      <span class="schema-note" title="decoded with the writer schema from the Schema Registry">
        {kFormatNames[schema.format] ?? schema.format} · schema {schema.id}
        {schema.message ? ` · ${schema.message}` : ""}
      </span>
    );
  }
  if (error) return <span class="schema-note bad">Framed, but not decoded: {error}</span>;
  return null;
}
