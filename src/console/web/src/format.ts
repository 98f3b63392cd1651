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

// Made once: toLocaleString with options builds a formatter per call, and a page of 200
// topics formats 800 numbers.
const kSmall = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const kWhole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function count(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  return (n < 10 ? kSmall : kWhole).format(n);
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
