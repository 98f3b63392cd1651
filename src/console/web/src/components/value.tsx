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
    const pretty = prettyJson(String(value));
    const lines = pretty.split("\n");
    if (lines.length <= 1) return <code class="json">{pretty}</code>;
    return (
      <details class="json" open={lines.length <= kFoldLines}>
        <summary aria-label={`${props.label}: JSON, ${lines.length} lines`}>
          <code>{oneLine(String(value))}</code>
        </summary>
        <pre>{pretty}</pre>
      </details>
    );
  }
  if (encoding === "hex") return <pre class="bytes">{hexBlock(String(value))}</pre>;
  if (encoding === "base64") return <pre class="bytes">{String(value)}</pre>;
  return <pre class="text">{String(value)}</pre>;
}

// JSON comes as its text (exactly as sent) and is laid out as text, never parsed: a number
// past 2^53 (an int64 id, a nanosecond time) would come back from JSON.parse rounded.
// `indent` null: one line. Whitespace between tokens is dropped, strings kept as they are.
function layoutJson(text: string, indent: number | null): string {
  let out = "";
  let depth = 0;
  let inString = false;
  let escaped = false;
  const newline = () => (indent === null ? "" : "\n" + " ".repeat(indent * depth));
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        out += c;
        break;
      case "{":
      case "[": {
        let j = i + 1;
        while (j < text.length && " \t\n\r".includes(text[j])) j++;
        if (text[j] === (c === "{" ? "}" : "]")) {
          out += c + text[j]; // empty: on one line
          i = j;
        } else {
          depth++;
          out += c + newline();
        }
        break;
      }
      case "}":
      case "]":
        depth = Math.max(0, depth - 1);
        out += newline() + c;
        break;
      case ",":
        out += "," + (indent === null ? " " : newline());
        break;
      case ":":
        out += ": ";
        break;
      case " ":
      case "\t":
      case "\n":
      case "\r":
        break;
      default:
        out += c;
    }
  }
  return out;
}

function prettyJson(value: string): string {
  return layoutJson(value, 2);
}

function oneLine(value: string): string {
  const s = layoutJson(value, null);
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
