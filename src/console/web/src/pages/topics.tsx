// Topics: the list with a filter, the create form, and delete after typing the name.
import { useState } from "preact/hooks";
import { paths, request } from "../api";
import { ConfirmByName } from "../components/confirm";
import { ErrorBox, Link, Loading, PairRows, pairsToObject, type Pair } from "../components/ui";
import * as fmt from "../format";
import { useAction, useResource, useTitle } from "../hooks";
import { hrefs, navigate } from "../router";
import type { Topic, TopicSummary } from "../types";

// Rows drawn at first, and added per "show more": a table's layout is paid per row drawn
// (200 rows: 55 ms of a small machine's main thread, a thousand half a second; `sluice
// bench console`), more than a screen holds is seldom read, and the filter finds a topic
// faster than scrolling does.
const kFirstRows = 50;
const kMoreRows = 200;

export function Topics() {
  useTitle("Topics");
  const [shown, setShown] = useState(kFirstRows);
  const [internal, setInternal] = useState(false);
  const [filter, setFilter] = useState("");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<string | null>(null);
  const list = useResource(
    () => request<{ topics: TopicSummary[] }>("GET", paths.topics(internal)),
    String(internal),
  );
  const needle = filter.trim().toLowerCase();
  const topics = (list.data?.topics ?? [])
    .filter((t) => t.name.toLowerCase().includes(needle))
    // Topic names are ASCII (Kafka's legal characters): compared as they are, no collator.
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  return (
    <section>
      <div class="title-row">
        <h1>Topics</h1>
        <button type="button" onClick={() => setCreating(!creating)} aria-expanded={creating}>
          {creating ? "Close the form" : "Create topic"}
        </button>
      </div>
      {creating && <CreateTopic onCancel={() => setCreating(false)} />}
      <div class="toolbar">
        <input
          type="search"
          placeholder="Filter by name"
          aria-label="Filter topics by name"
          value={filter}
          onInput={(e) => setFilter(e.currentTarget.value)}
        />
        <label class="inline">
          <input
            type="checkbox"
            checked={internal}
            onChange={(e) => setInternal(e.currentTarget.checked)}
          />
          internal topics
        </label>
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <ErrorBox error={list.error} />
      <Loading when={list.loading && !list.data} />
      {list.data && (
        <table>
          <caption class="sr-only">Topics</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col" class="num">Partitions</th>
              <th scope="col" class="num">Replication</th>
              <th scope="col" class="num">Size</th>
              <th scope="col" class="num">Messages</th>
              <th scope="col" class="num">Messages/s</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {topics.slice(0, shown).map((t) => (
              <tr key={t.name}>
                <td>
                  <Link href={hrefs.topic(t.name)}>{t.name}</Link>
                  {t.internal && <span class="tag">internal</span>}
                </td>
                <td class="num">{fmt.count(t.partitions)}</td>
                <td class="num">{fmt.count(t.replication_factor)}</td>
                <td class="num">{fmt.bytes(t.size_bytes)}</td>
                <td class="num">{fmt.count(t.messages)}</td>
                <td class="num">{fmt.count(Math.round(t.messages_per_sec))}</td>
                <td class="actions">
                  <button
                    type="button"
                    class="small danger"
                    aria-label={`Delete topic ${t.name}`}
                    onClick={() => setDeleting(t.name)}
                  >
                    Delete…
                  </button>
                </td>
              </tr>
            ))}
            {topics.length > shown && (
              <tr>
                <td colSpan={7}>
                  <span class="muted">
                    {fmt.count(shown)} of {fmt.count(topics.length)} shown{" "}
                  </span>
                  <button type="button" class="small" onClick={() => setShown(shown + kMoreRows)}>
                    Show {fmt.count(Math.min(kMoreRows, topics.length - shown))} more
                  </button>{" "}
                  {topics.length - shown > kMoreRows && (
                    <button type="button" class="small" onClick={() => setShown(topics.length)}>
                      Show all {fmt.count(topics.length)}
                    </button>
                  )}
                </td>
              </tr>
            )}
            {topics.length === 0 && (
              <tr>
                <td colSpan={7} class="muted">
                  {needle ? "No topic matches the filter." : "No topics yet."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      {deleting !== null && (
        <ConfirmByName
          what="topic"
          name={deleting}
          consequence="Its messages are deleted with it, on every broker. This cannot be undone."
          onConfirm={() => request("DELETE", paths.topic(deleting))}
          onDone={() => {
            setDeleting(null);
            list.reload();
          }}
          onCancel={() => setDeleting(null)}
        />
      )}
    </section>
  );
}

// The create form: name, partitions and replication (blank: the broker's defaults), and
// configs as key = value rows.
function CreateTopic(props: { onCancel: () => void }) {
  const [name, setName] = useState("");
  const [partitions, setPartitions] = useState("");
  const [replication, setReplication] = useState("");
  const [configs, setConfigs] = useState<Pair[]>([{ key: "", value: "" }]);
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const done = await action.run(() => {
      const body: Record<string, unknown> = { name: name.trim() };
      if (partitions !== "") body.partitions = Number(partitions);
      if (replication !== "") body.replication_factor = Number(replication);
      const c = pairsToObject(configs, "config");
      if (Object.keys(c).length > 0) body.configs = c;
      return request<Topic>("POST", paths.createTopic, body);
    });
    if (done.ok) navigate(hrefs.topic(done.value?.name ?? name.trim()));
  };
  return (
    <form class="panel" onSubmit={submit} aria-labelledby="create-topic">
      <h2 id="create-topic">Create a topic</h2>
      <div class="fields">
        <label>
          Name
          <input
            required
            autoFocus
            value={name}
            spellcheck={false}
            autoComplete="off"
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </label>
        <label>
          Partitions
          <input
            type="number"
            min={1}
            placeholder="broker default"
            value={partitions}
            onInput={(e) => setPartitions(e.currentTarget.value)}
          />
        </label>
        <label>
          Replication factor
          <input
            type="number"
            min={1}
            placeholder="broker default"
            value={replication}
            onInput={(e) => setReplication(e.currentTarget.value)}
          />
        </label>
      </div>
      <PairRows
        label="config"
        rows={configs}
        onChange={setConfigs}
        keyPlaceholder="cleanup.policy"
        valuePlaceholder="compact"
      />
      <ErrorBox error={action.error} />
      <div class="buttons">
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? "Creating…" : "Create"}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
