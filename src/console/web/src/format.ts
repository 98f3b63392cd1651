// How numbers, sizes, rates and times read on the page.

const kUnits = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < kUnits.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${kUnits[u]}`;
}

export function byteRate(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : `${bytes(n)}/s`;
}

// en-US digit grouping ("12,345.6") by hand: a page's first Intl.NumberFormat costs its
// renderer 60 to 100 ms (ICU's data, `sluice bench console`), at every first visit.
function grouped(n: number, fractionDigits: number): string {
  const scale = 10 ** fractionDigits;
  const rounded = Math.round(Math.abs(n) * scale) / scale;
  // From 1e21 up toString writes an exponent; such numbers have no fraction.
  const text = rounded < 1e21 ? rounded.toString() : BigInt(rounded).toString();
  const dot = text.indexOf(".");
  const whole = dot < 0 ? text : text.slice(0, dot);
  const fraction = dot < 0 ? "" : text.slice(dot);
  let out = "";
  for (let i = 0; i < whole.length; i++) {
    if (i > 0 && (whole.length - i) % 3 === 0) out += ",";
    out += whole[i];
  }
  return (n < 0 && rounded !== 0 ? "-" : "") + out + fraction;
}

// Text in code unit order, for sorting names: localeCompare's first call costs a page's
// renderer tens of ms (ICU's collation data), and Kafka's names are ASCII.
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function count(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  return grouped(n, n < 10 ? 1 : 0);
}

const pad = (n: number, w = 2) => String(n).padStart(w, "0");

// Local time, to the millisecond: "2026-12-01 14:03:59.120".
export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || ms < 0) return "–";
  const d = new Date(ms);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
  );
}

// The milliseconds of an <input type="datetime-local"> value (local time), or null.
export function fromLocalInput(value: string): number | null {
  if (value === "") return null;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? null : ms;
}

// "0,1, 4-6" → [0, 1, 4, 5, 6]; null when it is not such a list.
export function partitionList(text: string): number[] | null {
  const out: number[] = [];
  for (const part of text.split(",")) {
    const p = part.trim();
    if (p === "") continue;
    const m = /^(\d+)(?:\s*-\s*(\d+))?$/.exec(p);
    if (!m) return null;
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo || hi - lo > 100000) return null;
    for (let i = lo; i <= hi; i++) out.push(i);
  }
  return out;
}
