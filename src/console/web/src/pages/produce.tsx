// Produce one message to a topic: partition (blank: the partitioner's choice), key, value
// and headers. The value is sent as the text typed; Ctrl+Enter in it submits.
import { useState } from "preact/hooks";
import { paths, request } from "../api";
import { ErrorBox, PairRows, pairsToObject, type Pair } from "../components/ui";
import { useAction } from "../hooks";
import type { Produced } from "../types";

export function Produce(props: { topic: string; partitions: number }) {
  const [partition, setPartition] = useState("");
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [headers, setHeaders] = useState<Pair[]>([]);
  const [written, setWritten] = useState<Produced | null>(null);
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    setWritten(null);
    const done = await action.run(() => {
      const body: Record<string, unknown> = { value };
      if (partition !== "") body.partition = Number(partition);
      if (key !== "") body.key = key;
      const h = pairsToObject(headers, "header");
      if (Object.keys(h).length > 0) body.headers = h;
      return request<Produced>("POST", paths.produce(props.topic), body);
    });
    if (done.ok) setWritten(done.value);
  };
  return (
    <section aria-labelledby="produce">
      <h2 id="produce">Produce a message</h2>
      <form class="panel" onSubmit={submit}>
        <div class="fields">
          <label>
            Partition
            <select value={partition} onChange={(e) => setPartition(e.currentTarget.value)}>
              <option value="">by key (or any)</option>
              {Array.from({ length: props.partitions }, (_, p) => (
                <option key={p} value={String(p)}>
                  {p}
                </option>
              ))}
            </select>
          </label>
          <label>
            Key
            <input
              value={key}
              placeholder="none"
              spellcheck={false}
              onInput={(e) => setKey(e.currentTarget.value)}
            />
          </label>
        </div>
        <label class="block">
          Value
          <textarea
            rows={5}
            value={value}
            spellcheck={false}
            placeholder='{"hello": "world"}'
            onInput={(e) => setValue(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
                e.preventDefault();
                e.currentTarget.form?.requestSubmit();
              }
            }}
          />
        </label>
        <PairRows label="header" rows={headers} onChange={setHeaders} />
        <ErrorBox error={action.error} />
        {written && (
          <p class="ok" role="status">
            Written to partition {written.partition} at offset {written.offset}.
          </p>
        )}
        <div class="buttons">
          <button type="submit" class="primary" disabled={action.busy}>
            {action.busy ? "Producing…" : "Produce"}
          </button>
          <span class="muted small">Ctrl+Enter in the value produces too.</span>
        </div>
      </form>
    </section>
  );
}
