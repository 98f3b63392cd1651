// A query's rows as a grid that stays quick at a million rows: rows have one fixed height,
// only those in view (and a few around) are elements, and the rest is an empty block of
// their height that the scroll bar measures. Numbers are right-aligned; NULL reads NULL.
import type { JSX } from "preact";
import { useRef, useState } from "preact/hooks";
import type { SqlColumn, SqlValue } from "../types";

const kRowPx = 24;
const kHeadPx = 42;
const kMaxViewPx = 480;
const kOverscanRows = 6;
// Browsers cap an element's height (Firefox near 17.9 million px): past this, the scroll
// bar moves over this many pixels and a position in it maps to a row proportionally.
const kMaxBodyPx = 8_000_000;
// Columns are as wide as their header and the longest value among the first rows and
// the rows shown so far (a column widens when a longer value scrolls into view, never
// narrows).
const kSampleRows = 200;
const kCharPx = 7.6;
const kMinColPx = 64;
const kMaxColPx = 360;

export function ResultGrid(props: {
  columns: SqlColumn[];
  rows: SqlValue[][];  // grows in place while the query runs
  count: number;  // rows.length when rendered: a new count renders the new rows
  label: string;
}) {
  const { columns, rows, count } = props;
  const [scrollTop, setScrollTop] = useState(0);
  // Characters of the widest text seen per column, and how many of the first rows were
  // measured. The component is made afresh for every result set (its key).
  const widest = useRef<{ chars: number[]; sampled: number } | null>(null);
  if (widest.current === null) {
    widest.current = {
      chars: columns.map((c) => Math.max(c.name.length, c.type.length * 0.85)),
      sampled: 0,
    };
  }
  const measured = widest.current;
  const measure = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const row = rows[i];
      for (let j = 0; j < columns.length; j++) {
        const v = row[j];
        const chars = v === null || v === undefined ? 4 : String(v).length;
        if (chars > measured.chars[j]) measured.chars[j] = chars;
      }
    }
  };
  const sample = Math.min(count, kSampleRows);
  if (measured.sampled < sample) {
    measure(measured.sampled, sample);
    measured.sampled = sample;
  }

  const totalPx = count * kRowPx;
  const bodyPx = Math.min(totalPx, kMaxBodyPx);
  const viewPx = Math.min(kMaxViewPx, kHeadPx + totalPx + 18);  // 18: a horizontal scroll bar
  const rowsPx = viewPx - kHeadPx;
  // The scroll position as a position in the rows' full height (the same when unscaled).
  const scale = bodyPx > rowsPx ? Math.max(0, totalPx - rowsPx) / (bodyPx - rowsPx) : 1;
  const top = Math.min(scrollTop, Math.max(0, bodyPx - rowsPx)) * scale;
  const first = Math.max(0, Math.floor(top / kRowPx) - kOverscanRows);
  const last = Math.min(count, Math.ceil((top + rowsPx) / kRowPx) + kOverscanRows);
  // Where the first rendered row goes in the body, so that the row at `top` is at the top
  // of the view.
  const offset = Math.min(scrollTop, Math.max(0, bodyPx - rowsPx)) - (top - first * kRowPx);
  measure(first, last);
  const widths = measured.chars.map((chars) =>
    Math.round(Math.min(kMaxColPx, Math.max(kMinColPx, chars * kCharPx + 22))),
  );
  const numberPx = Math.ceil(String(count).length * kCharPx) + 20;
  const template = [`${numberPx}px`, ...widths.map((w) => `${w}px`)].join(" ");
  const width = numberPx + widths.reduce((a, b) => a + b, 0);

  const shown: JSX.Element[] = [];
  for (let i = first; i < last; i++) {
    const row = rows[i];
    shown.push(
      <div
        class="grid-row"
        role="row"
        aria-rowindex={i + 2}
        key={i}
        style={{ gridTemplateColumns: template }}
      >
        <div class="grid-cell grid-number" role="rowheader">
          {i + 1}
        </div>
        {columns.map((c, j) => (
          <Cell key={j} value={row[j]} numeric={c.numeric} />
        ))}
      </div>,
    );
  }

  return (
    <div
      class="grid"
      role="table"
      aria-label={props.label}
      aria-rowcount={count + 1}
      // Scrollable with the keyboard: arrows, Page Up/Down, Home/End.
      tabIndex={0}
      data-testid="result-grid"
      style={{ height: `${viewPx}px` }}
      onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
    >
      <div
        class="grid-row grid-head"
        role="row"
        aria-rowindex={1}
        style={{ gridTemplateColumns: template, width: `${width}px` }}
      >
        <div class="grid-cell grid-number" role="columnheader">
          #
        </div>
        {columns.map((c, j) => (
          <div
            key={j}
            class={`grid-cell${c.numeric ? " num" : ""}`}
            role="columnheader"
            title={`${c.name}: ${c.type}`}
          >
            <span class="grid-name">{c.name}</span>
            <span class="grid-type">{c.type}</span>
          </div>
        ))}
      </div>
      <div class="grid-body" style={{ height: `${bodyPx}px`, width: `${width}px` }}>
        <div role="rowgroup" style={{ transform: `translateY(${offset}px)` }}>
          {shown}
        </div>
      </div>
    </div>
  );
}

function Cell(props: { value: SqlValue | undefined; numeric: boolean }) {
  const v = props.value;
  const cls = `grid-cell${props.numeric ? " num" : ""}`;
  if (v === null || v === undefined) {
    return (
      <div class={`${cls} null`} role="cell">
        NULL
      </div>
    );
  }
  const text = String(v);
  return (
    <div class={cls} role="cell" title={text.length > 24 ? text : undefined}>
      {text}
    </div>
  );
}
