// Small pieces every page uses: links that route in the page, the error box beside a form,
// and rows of key = value inputs.
import type { ComponentChildren } from "preact";
import { ApiError } from "../api";
import { onLinkClick } from "../router";

export function Link(props: { href: string; class?: string; children: ComponentChildren }) {
  return (
    <a href={props.href} class={props.class} onClick={onLinkClick}>
      {props.children}
    </a>
  );
}

// An API error where the user looks: beside the form or table it is about.
export function ErrorBox(props: { error: ApiError | undefined; children?: ComponentChildren }) {
  if (!props.error) return null;
  return (
    <div class="error" role="alert">
      <strong>{props.error.code}</strong>
      {props.error.message ? `: ${props.error.message}` : ""}
      {props.children}
    </div>
  );
}

// "loading…" while the first answer is awaited; nothing once there is something to show.
export function Loading(props: { when: boolean }) {
  return props.when ? <p class="muted">loading…</p> : null;
}

export interface Pair {
  key: string;
  value: string;
}

// Rows of key = value inputs with add and remove buttons (topic configs, message headers).
export function PairRows(props: {
  label: string;
  rows: Pair[];
  onChange: (rows: Pair[]) => void;
  keyPlaceholder?: string;
  valuePlaceholder?: string;
}) {
  const set = (i: number, p: Partial<Pair>) =>
    props.onChange(props.rows.map((r, j) => (j === i ? { ...r, ...p } : r)));
  return (
    <fieldset class="pairs">
      <legend>{props.label}</legend>
      {props.rows.map((r, i) => (
        <div class="pair" key={i}>
          <input
            aria-label={`${props.label} ${i + 1}: name`}
            placeholder={props.keyPlaceholder ?? "name"}
            value={r.key}
            onInput={(e) => set(i, { key: e.currentTarget.value })}
          />
          <span aria-hidden="true">=</span>
          <input
            aria-label={`${props.label} ${i + 1}: value`}
            placeholder={props.valuePlaceholder ?? "value"}
            value={r.value}
            onInput={(e) => set(i, { value: e.currentTarget.value })}
          />
          <button
            type="button"
            class="small"
            aria-label={`remove ${props.label} ${i + 1}`}
            onClick={() => props.onChange(props.rows.filter((_, j) => j !== i))}
          >
            ✕
          </button>
        </div>
      ))}
      <button
        type="button"
        class="small"
        onClick={() => props.onChange([...props.rows, { key: "", value: "" }])}
      >
        add
      </button>
    </fieldset>
  );
}

// The rows as an object; rows left empty are skipped. An ApiError (shown like the
// server's) when a row has a value but no name, or a name twice.
export function pairsToObject(rows: Pair[], label: string): Record<string, string> {
  // No prototype: a config named "__proto__" or "constructor" is a key like any other.
  const out: Record<string, string> = Object.create(null);
  for (const r of rows) {
    const key = r.key.trim();
    if (key === "" && r.value === "") continue;
    if (key === "") throw new ApiError(0, "INVALID_REQUEST", `a ${label} has a value but no name`);
    if (Object.hasOwn(out, key)) throw new ApiError(0, "INVALID_REQUEST", `${label} ${key} is given twice`);
    out[key] = r.value;
  }
  return out;
}
