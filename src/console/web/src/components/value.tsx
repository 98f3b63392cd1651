// A message's key, value or header as the API encoded it (docs/design/0026-console.md #4):
// JSON pretty-printed and collapsible, text as it is, bytes as hex or base64 in a
// monospace block.
import type { Encoding } from "../types";

// JSON longer than this many lines starts folded to one line (a page of messages reads
// as a list; a click opens one).
const kFoldLines = 1;

export function EncodedValue(props: {
  value: string | null;
  encoding: Encoding | null;
  truncated?: boolean;
  label: string;
}) {
  const { value, encoding } = props;
  if (value === null || value === undefined) return <span class="muted">null</span>;
  if (props.truncated) {
    // Only the first 64 KiB came: shown as it is, said so.
    return (
      <div>
        <pre class={encoding === "hex" || encoding === "base64" ? "bytes" : "text"}>
          {encoding === "hex" ? hexBlock(value) : value}
        </pre>
        <span class="muted">(the first 64 KiB)</span>
      </div>
    );
  }
  if (encoding === "json") {
    const pretty = prettyJson(value);
    const lines = pretty.split("\n");
    if (lines.length <= 1) return <code class="json">{pretty}</code>;
    return (
      <details class="json" open={lines.length <= kFoldLines}>
        <summary aria-label={`${props.label}: JSON, ${lines.length} lines`}>
          <code>{oneLine(value)}</code>
        </summary>
        <pre>{pretty}</pre>
      </details>
    );
  }
  if (encoding === "hex") return <pre class="bytes">{hexBlock(String(value))}</pre>;
  if (encoding === "base64") return <pre class="bytes">{String(value)}</pre>;
  return <pre class="text">{String(value)}</pre>;
}

// JSON comes as its text (exactly as sent); parsed here to be laid out.
function parsed(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function prettyJson(value: unknown): string {
  return JSON.stringify(parsed(value), null, 2) ?? String(value);
}

function oneLine(value: unknown): string {
  const s = JSON.stringify(parsed(value)) ?? String(value);
  return s.length > 120 ? `${s.slice(0, 119)}…` : s;
}

// "0a1b2c…" as lines of 16 bytes: "0000  0a 1b 2c …".
function hexBlock(hex: string): string {
  const clean = hex.replace(/[^0-9a-fA-F]/g, "");
  const lines: string[] = [];
  for (let i = 0; i < clean.length; i += 32) {
    const bytes = clean.slice(i, i + 32).match(/../g) ?? [];
    lines.push(`${(i / 2).toString(16).padStart(4, "0")}  ${bytes.join(" ")}`);
  }
  return lines.join("\n");
}
