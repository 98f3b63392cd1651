// One topic: its partitions (and adding some), its configs (and changing them), its
// messages, a form to produce one, and delete.
import { useState } from "preact/hooks";
import { paths, request } from "../api";
import { ConfirmByName } from "../components/confirm";
import { ErrorBox, Link, Loading } from "../components/ui";
import * as fmt from "../format";
import { useAction, useResource, useTitle } from "../hooks";
import { navigate } from "../router";
import type { Topic as TopicData, TopicConfig } from "../types";
import { MessageBrowser } from "./messages";
import { Produce } from "./produce";

export function Topic(props: { name: string }) {
  useTitle(props.name);
  const topic = useResource(() => request<TopicData>("GET", paths.topic(props.name)), props.name);
  const [deleting, setDeleting] = useState(false);
  const t = topic.data;
  return (
    <section>
      <p class="crumbs">
        <Link href="/topics">Topics</Link> /
      </p>
      <div class="title-row">
        <h1>
          {props.name}
          {t?.internal && <span class="tag">internal</span>}
        </h1>
        <button type="button" onClick={topic.reload} disabled={topic.loading}>
          Refresh
        </button>
        <button type="button" class="danger" onClick={() => setDeleting(true)}>
          Delete topic…
        </button>
      </div>
      <ErrorBox error={topic.error}>
        {topic.error?.status === 404 && (
          <>
            {" "}
            <Link href="/topics">Back to the topics</Link>
          </>
        )}
      </ErrorBox>
      <Loading when={topic.loading && !t} />
      {t && (
        <>
          <Partitions topic={t} onChanged={topic.reload} />
          <Configs topic={t} onChanged={topic.reload} />
          <MessageBrowser topic={t.name} partitions={t.partitions.length} />
          <Produce topic={t.name} partitions={t.partitions.length} />
        </>
      )}
      {deleting && (
        <ConfirmByName
          what="topic"
          name={props.name}
          consequence="Its messages are deleted with it, on every broker. This cannot be undone."
          onConfirm={() => request("DELETE", paths.topic(props.name))}
          onDone={() => navigate("/topics")}
          onCancel={() => setDeleting(false)}
        />
      )}
    </section>
  );
}

function Partitions(props: { topic: TopicData; onChanged: () => void }) {
  const parts = [...props.topic.partitions].sort((a, b) => a.partition - b.partition);
  const [count, setCount] = useState("");
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const done = await action.run(() =>
      request<TopicData>("POST", paths.partitions(props.topic.name), { count: Number(count) }),
    );
    if (done.ok) {
      setCount("");
      props.onChanged();
    }
  };
  return (
    <section aria-labelledby="partitions">
      <h2 id="partitions">Partitions ({parts.length})</h2>
      <table>
        <thead>
          <tr>
            <th scope="col" class="num">Partition</th>
            <th scope="col" class="num">Leader</th>
            <th scope="col">Replicas</th>
            <th scope="col">In sync</th>
            <th scope="col" class="num">Low</th>
            <th scope="col" class="num">High</th>
            <th scope="col" class="num">Messages</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {parts.map((p) => (
            <tr key={p.partition}>
              <td class="num">{p.partition}</td>
              <td class="num">{p.leader < 0 ? "none" : p.leader}</td>
              <td>{p.replicas.join(", ")}</td>
              <td class={p.isr.length < p.replicas.length ? "warn" : undefined}>
                {p.isr.join(", ")}
              </td>
              <td class="num">{fmt.count(p.low)}</td>
              <td class="num">{fmt.count(p.high)}</td>
              <td class="num">{fmt.count(p.high - p.low)}</td>
              <td>{p.error ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <form class="inline-form" onSubmit={submit}>
        <label>
          Partitions in all
          <input
            type="number"
            required
            min={parts.length + 1}
            placeholder={String(parts.length + 1)}
            value={count}
            onInput={(e) => setCount(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={action.busy}>
          {action.busy ? "Adding…" : "Add partitions"}
        </button>
        <span class="muted small">
          Partitions can be added, never removed; keys then map to other partitions.
        </span>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}

function Configs(props: { topic: TopicData; onChanged: () => void }) {
  const [filter, setFilter] = useState("");
  const [onlySet, setOnlySet] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const needle = filter.trim().toLowerCase();
  const configs = [...props.topic.configs]
    .filter((c) => c.name.toLowerCase().includes(needle) && (!onlySet || !c.default))
    .sort((a, b) => fmt.compareText(a.name, b.name));
  return (
    <section aria-labelledby="configs">
      <h2 id="configs">Configs</h2>
      <div class="toolbar">
        <input
          type="search"
          placeholder="Filter by name"
          aria-label="Filter configs by name"
          value={filter}
          onInput={(e) => setFilter(e.currentTarget.value)}
        />
        <label class="inline">
          <input
            type="checkbox"
            checked={onlySet}
            onChange={(e) => setOnlySet(e.currentTarget.checked)}
          />
          only those not at their default
        </label>
      </div>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Value</th>
            <th scope="col">Source</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {configs.map((c) =>
            editing === c.name ? (
              <EditConfig
                key={c.name}
                topic={props.topic.name}
                config={c}
                onDone={() => {
                  setEditing(null);
                  props.onChanged();
                }}
                onCancel={() => setEditing(null)}
              />
            ) : (
              <tr key={c.name} class={c.default ? undefined : "set"}>
                <td>
                  <code>{c.name}</code>
                </td>
                <td class="value">
                  {c.sensitive ? (
                    <span class="muted">(hidden)</span>
                  ) : (
                    <code>{c.value ?? "null"}</code>
                  )}
                </td>
                <td class="muted">{c.source}</td>
                <td class="actions">
                  {!c.read_only && (
                    <button
                      type="button"
                      class="small"
                      aria-label={`Edit ${c.name}`}
                      onClick={() => setEditing(c.name)}
                    >
                      Edit
                    </button>
                  )}
                </td>
              </tr>
            ),
          )}
        </tbody>
      </table>
    </section>
  );
}

// A config's row while it is edited: Save sets it on the topic, "Use the default" removes
// the topic's own value. Both PUT .../configs and re-read the topic.
function EditConfig(props: {
  topic: string;
  config: TopicConfig;
  onDone: () => void;
  onCancel: () => void;
}) {
  const c = props.config;
  const [value, setValue] = useState(c.sensitive ? "" : (c.value ?? ""));
  const action = useAction();
  const put = async (body: { set?: Record<string, string>; delete?: string[] }) => {
    const done = await action.run(() => request("PUT", paths.configs(props.topic), body));
    if (done.ok) props.onDone();
  };
  const formId = `config-${c.name}`;
  return (
    <tr class="editing">
      <td>
        <label for={`${formId}-value`}>
          <code>{c.name}</code>
        </label>
      </td>
      <td colSpan={2}>
        <form
          id={formId}
          class="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void put({ set: { [c.name]: value } });
          }}
          onKeyDown={(e) => {
            if (e.key === "Escape") props.onCancel();
          }}
        >
          <input
            id={`${formId}-value`}
            autoFocus
            value={value}
            spellcheck={false}
            onInput={(e) => setValue(e.currentTarget.value)}
          />
          <button type="submit" class="primary" disabled={action.busy}>
            Save
          </button>
          {!c.default && (
            <button type="button" disabled={action.busy} onClick={() => put({ delete: [c.name] })}>
              Use the default
            </button>
          )}
          <button type="button" onClick={props.onCancel}>
            Cancel
          </button>
        </form>
        <ErrorBox error={action.error} />
      </td>
      <td />
    </tr>
  );
}
