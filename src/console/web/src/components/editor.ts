// The editors of the console: CodeMirror 6 with YAML for the pipeline pages, with SQL
// for the SQL page. Loaded with import() by components/editor-box.tsx, so that CodeMirror
// is a chunk of its own (build.mjs) that only the editor pages fetch. Imports nothing of
// the page but types: whatever it imported would be split into a chunk shared with the
// page's script.
//
// The page's Content-Security-Policy allows no inline <style>, and CodeMirror mounts its
// styles with a <style> element in a document but as a constructed stylesheet
// (adoptedStyleSheets, which the policy allows) in a shadow root: the editor lives in an
// open shadow root of `host`. The page's colour variables inherit into it.
import { EditorState, Compartment, Prec, StateEffect, StateField, type Extension } from "@codemirror/state";
import {
  Decoration,
  EditorView,
  WidgetType,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  highlightSpecialChars,
  keymap,
  lineNumbers,
  type DecorationSet,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  HighlightStyle,
  bracketMatching,
  indentOnInput,
  syntaxHighlighting,
} from "@codemirror/language";
import { yaml } from "@codemirror/lang-yaml";
import { PostgreSQL, sql, type SQLNamespace } from "@codemirror/lang-sql";
import {
  autocompletion,
  type Completion,
  type CompletionContext,
  type CompletionResult,
} from "@codemirror/autocomplete";
import { lintGutter, lintKeymap, setDiagnostics, type Diagnostic } from "@codemirror/lint";
import { tags as t } from "@lezer/highlight";
import type { SqlRelation } from "../types";

export interface LineProblem {
  line: number;  // 1-based
  message: string;
  severity: "error" | "warning";
}

// What every editor of the page can do.
export interface Editor {
  text(): string;
  setText(text: string): void;
  setDark(dark: boolean): void;
  focus(): void;
  destroy(): void;
}

export interface YamlEditor extends Editor {
  // Replaces the problems shown: each as a lint diagnostic on its line (underlined, a
  // gutter marker, F8 moves to it) and its message in a block under the line.
  setProblems(problems: LineProblem[]): void;
  goToLine(line: number): void;
}

export interface SqlEditor extends Editor {
  // The relations and columns it completes (GET /api/v1/sql/schema).
  setSchema(relations: SqlRelation[]): void;
  // Underlines the error at `position` (1-based, in characters of `sent`, as Postgres
  // counts) and moves the cursor there; null clears it. Nothing is marked when the text
  // is no longer what was sent: the position would point elsewhere.
  markError(error: { sent: string; position: number; message: string } | null): void;
}

export interface EditorOptions {
  text: string;
  dark: boolean;
  label: string;  // the accessible name of the text area
  onChange: (text: string) => void;
  onRun: () => void;  // Ctrl/Cmd+Enter
}

// Colours from the page's stylesheet (styles.css), so both themes read.
const highlight = HighlightStyle.define([
  { tag: t.definition(t.propertyName), color: "var(--code-key)" },
  { tag: [t.string, t.special(t.string)], color: "var(--code-string)" },
  { tag: [t.lineComment, t.comment], color: "var(--muted)", fontStyle: "italic" },
  { tag: [t.meta, t.separator, t.punctuation], color: "var(--muted)" },
  { tag: [t.keyword, t.typeName, t.labelName], color: "var(--code-keyword)" },
  { tag: t.invalid, color: "var(--danger)" },
]);

// SQL's: keywords and types in the keyword colour, built-in functions and literals in the
// key colour, strings as YAML's; quoted identifiers are names and stay plain.
const sqlHighlight = HighlightStyle.define([
  { tag: [t.keyword, t.typeName], color: "var(--code-keyword)" },
  { tag: t.standard(t.name), color: "var(--code-key)" },
  { tag: [t.number, t.bool, t.null], color: "var(--code-key)" },
  { tag: t.string, color: "var(--code-string)" },
  { tag: [t.lineComment, t.blockComment], color: "var(--muted)", fontStyle: "italic" },
  { tag: [t.operator, t.punctuation], color: "var(--muted)" },
]);

const theme = EditorView.theme({
  "&": {
    color: "var(--fg)",
    backgroundColor: "var(--bg)",
    border: "1px solid var(--line)",
    borderRadius: "6px",
    fontSize: "13px",
    maxHeight: "70vh",
  },
  "&.cm-focused": { outline: "2px solid var(--focus)", outlineOffset: "1px" },
  ".cm-scroller": {
    fontFamily: "var(--mono)",
    lineHeight: "1.5",
    overflow: "auto",
  },
  ".cm-content": { caretColor: "var(--fg)" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg)" },
  ".cm-gutters": {
    backgroundColor: "var(--panel)",
    color: "var(--muted)",
    borderRight: "1px solid var(--line)",
    borderRadius: "6px 0 0 6px",
  },
  ".cm-activeLine": { backgroundColor: "var(--code-active-line)" },
  ".cm-activeLineGutter": { backgroundColor: "var(--code-active-line)", color: "var(--fg)" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, ::selection":
    { backgroundColor: "var(--code-selection)" },
  ".cm-problem": {
    fontFamily: "system-ui, sans-serif",
    fontSize: "12.5px",
    lineHeight: "1.4",
    padding: "2px 8px 3px 10px",
    margin: "1px 0 3px",
    borderLeft: "3px solid var(--danger)",
    backgroundColor: "var(--error-bg)",
    color: "var(--fg)",
    whiteSpace: "pre-wrap",
  },
  ".cm-problem-warning": { borderLeftColor: "var(--warn)", backgroundColor: "var(--warn-bg)" },
  ".cm-problem-label": { fontWeight: "600", marginRight: "6px" },
  ".cm-tooltip": {
    backgroundColor: "var(--panel)",
    color: "var(--fg)",
    border: "1px solid var(--line)",
  },
  ".cm-panels": { backgroundColor: "var(--panel)", color: "var(--fg)" },
  ".cm-tooltip-autocomplete > ul": { fontFamily: "var(--mono)", fontSize: "12.5px" },
  ".cm-tooltip-autocomplete ul li[aria-selected]": {
    backgroundColor: "var(--accent)",
    color: "var(--accent-fg)",
  },
  ".cm-completionDetail": { color: "inherit", opacity: "0.75", marginLeft: "1em" },
});

// The text area's height when (nearly) empty: room to write without the page jumping.
const minHeight = (px: number) =>
  EditorView.theme({ ".cm-content, .cm-gutter": { minHeight: `${px}px` } });

// The problems' messages as blocks under their lines. Kept as decorations mapped through
// edits, so that they stay with their lines until the next check replaces them.
const setProblemsEffect = StateEffect.define<LineProblem[]>();

class ProblemWidget extends WidgetType {
  constructor(
    readonly severity: LineProblem["severity"],
    readonly message: string,
  ) {
    super();
  }
  eq(other: ProblemWidget) {
    return other.severity === this.severity && other.message === this.message;
  }
  toDOM() {
    const div = document.createElement("div");
    div.className = `cm-problem cm-problem-${this.severity}`;
    div.setAttribute("role", "note");
    const label = document.createElement("span");
    label.className = "cm-problem-label";
    label.textContent = this.severity === "error" ? "Problem:" : "Warning:";
    div.append(label, this.message);
    return div;
  }
  ignoreEvent() {
    return false;
  }
}

// Line `n` (clamped to the text's) without its indentation.
function lineSpan(state: EditorState, n: number): { from: number; to: number } {
  const line = state.doc.line(Math.min(Math.max(1, n), state.doc.lines));
  const indent = /^\s*/.exec(line.text)?.[0].length ?? 0;
  return { from: Math.min(line.from + indent, line.to), to: line.to };
}

const problemBlocks = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(blocks, tr) {
    let out = blocks.map(tr.changes);
    for (const e of tr.effects) {
      if (!e.is(setProblemsEffect)) continue;
      out = Decoration.set(
        e.value.map((p) =>
          Decoration.widget({
            widget: new ProblemWidget(p.severity, p.message),
            block: true,
            side: 1,
          }).range(lineSpan(tr.state, p.line).to),
        ),
        true,
      );
    }
    return out;
  },
  provide: (f) => EditorView.decorations.from(f),
});

// An editor in an open shadow root of `host`, with what both editors share: line numbers,
// history, the lint gutter, Ctrl/Cmd+Enter to run, the page's colours and theme.
function mount(
  host: HTMLElement,
  opts: EditorOptions,
  extensions: Extension[],
): { view: EditorView; editor: Editor } {
  const root = host.shadowRoot ?? host.attachShadow({ mode: "open" });
  root.replaceChildren();
  const parent = document.createElement("div");
  root.append(parent);

  const dark = new Compartment();
  const darkTheme = (on: boolean): Extension => EditorView.theme({}, { dark: on });
  const shared: Extension[] = [
    lineNumbers(),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    drawSelection(),
    indentOnInput(),
    bracketMatching(),
    highlightActiveLine(),
    lintGutter(),
    EditorView.lineWrapping,
    EditorView.contentAttributes.of({ "aria-label": opts.label }),
    Prec.highest(
      keymap.of([
        {
          key: "Mod-Enter",
          run: () => {
            opts.onRun();
            return true;
          },
        },
      ]),
    ),
    // Tab indents; Escape then Tab leaves the editor, as CodeMirror does for keyboard
    // users.
    keymap.of([...defaultKeymap, ...historyKeymap, ...lintKeymap, indentWithTab]),
    theme,
    dark.of(darkTheme(opts.dark)),
    EditorView.updateListener.of((u) => {
      if (u.docChanged) opts.onChange(u.state.doc.toString());
    }),
  ];
  const view = new EditorView({
    parent,
    root,
    state: EditorState.create({ doc: opts.text, extensions: [...extensions, ...shared] }),
  });
  const editor: Editor = {
    text: () => view.state.doc.toString(),
    setText(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    setDark(on) {
      view.dispatch({ effects: dark.reconfigure(darkTheme(on)) });
    },
    focus: () => view.focus(),
    destroy: () => view.destroy(),
  };
  return { view, editor };
}

export function createYamlEditor(host: HTMLElement, opts: EditorOptions): YamlEditor {
  const { view, editor } = mount(host, opts, [
    syntaxHighlighting(highlight),
    yaml(),
    problemBlocks,
    // YAML has no tab characters: Tab indents by two spaces.
    EditorState.tabSize.of(2),
    minHeight(320),
  ]);
  return {
    ...editor,
    setProblems(problems) {
      const state = view.state;
      const diagnostics: Diagnostic[] = problems.map((p) => {
        const s = lineSpan(state, p.line);
        return { from: s.from, to: s.to, severity: p.severity, message: p.message };
      });
      view.dispatch(setDiagnostics(state, diagnostics));
      view.dispatch({ effects: setProblemsEffect.of(problems) });
    },
    goToLine(n) {
      const s = lineSpan(view.state, n);
      view.dispatch({ selection: { anchor: s.from }, scrollIntoView: true });
      view.focus();
    },
  };
}

export function createSqlEditor(host: HTMLElement, opts: EditorOptions): SqlEditor {
  const language = new Compartment();
  const { view, editor } = mount(host, opts, [
    syntaxHighlighting(sqlHighlight),
    language.of(sqlLanguage([])),
    autocompletion({ icons: false }),
    minHeight(140),
  ]);
  return {
    ...editor,
    setSchema(relations) {
      view.dispatch({ effects: language.reconfigure(sqlLanguage(relations)) });
    },
    markError(error) {
      const state = view.state;
      if (error === null || state.doc.toString() !== error.sent) {
        view.dispatch(setDiagnostics(state, []));
        return;
      }
      const span = errorSpan(error.sent, error.position);
      view.dispatch(
        setDiagnostics(state, [{ ...span, severity: "error", message: error.message }]),
      );
      view.dispatch({ selection: { anchor: span.from }, scrollIntoView: true });
    },
  };
}

// Postgres's SQL (the query server speaks its protocol; DuckDB reads the same), with
// keywords completed in capitals, and the relations' names and columns.
function sqlLanguage(relations: SqlRelation[]): Extension {
  const support = sql({
    dialect: PostgreSQL,
    upperCaseKeywords: true,
    schema: namespaceOf(relations),
  });
  return [support, support.language.data.of({ autocomplete: columnsInScope(relations) })];
}

// The names as lang-sql completes them: a relation at the path its sql_name spells
// ("lake.ns.t": lake, then ns, then t), its columns after it and a dot. lang-sql splits
// the keys at unescaped dots, so a dot within a quoted name is escaped.
function namespaceOf(relations: SqlRelation[]): SQLNamespace {
  const out: Record<string, SQLNamespace> = Object.create(null);
  for (const r of relations) {
    const parts = splitSqlName(r.sql_name);
    const key = parts.map((p) => p.replace(/\./g, "\\.")).join(".");
    const name = parts[parts.length - 1];
    out[key] = {
      self: { label: name, type: "class", detail: r.kind, apply: quoted(name) },
      children: r.columns.map((c) => columnCompletion(c.name, c.type)),
    };
  }
  return out;
}

// lake.ns."my table" → ["lake", "ns", "my table"]: the levels of a name as SQL writes them.
function splitSqlName(name: string): string[] {
  const parts: string[] = [];
  let i = 0;
  while (i <= name.length) {
    let part = "";
    if (name[i] === '"') {
      // A quoted level: "" inside is one quote.
      for (i++; i < name.length; i++) {
        if (name[i] === '"' && name[i + 1] === '"') {
          part += '"';
          i++;
        } else if (name[i] === '"') {
          i++;
          break;
        } else {
          part += name[i];
        }
      }
      const dot = name.indexOf(".", i);
      i = dot < 0 ? name.length + 1 : dot + 1;
    } else {
      const dot = name.indexOf(".", i);
      const end = dot < 0 ? name.length : dot;
      part = name.slice(i, end);
      i = end + 1;
    }
    parts.push(part);
  }
  return parts;
}

// A name as SQL must write it: as it is when it is a plain lower-case identifier (SQL
// folds unquoted names to lower case), else quoted.
function quoted(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

function columnCompletion(name: string, type: string, of?: string): Completion {
  return {
    label: name,
    type: "property",
    detail: of === undefined ? type : `${type} · ${of}`,
    apply: quoted(name),
  };
}

// The columns of the relations the text names, offered where a name starts without a
// qualifier (SELECT a|, WHERE a|): lang-sql completes a column only after its relation
// and a dot.
function columnsInScope(relations: SqlRelation[]) {
  const named = relations.map((r) => ({
    relation: r,
    pattern: new RegExp(`(^|[^\\w$."])${escapeRegExp(r.sql_name)}($|[^\\w$"])`, "i"),
  }));
  return (ctx: CompletionContext): CompletionResult | null => {
    const word = ctx.matchBefore(/[\w$]+/);
    if (!word && !ctx.explicit) return null;
    const from = word ? word.from : ctx.pos;
    const before = ctx.state.sliceDoc(Math.max(0, from - 1), from);
    if (before === "." || before === '"') return null;  // lang-sql's: a qualified name
    const text = ctx.state.doc.toString();
    const options: Completion[] = [];
    for (const n of named) {
      if (!n.pattern.test(text)) continue;
      for (const c of n.relation.columns) {
        options.push(columnCompletion(c.name, c.type, n.relation.name));
      }
    }
    return options.length === 0 ? null : { from, options, validFor: /^[\w$]*$/ };
  };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// Where to underline an error at `position` (1-based, in characters): the word, quoted
// name or string that starts there, else the one character; at the end of the text, its
// last character.
function errorSpan(text: string, position: number): { from: number; to: number } {
  // Characters, not UTF-16 units: a character past U+FFFF is two of JavaScript's.
  let from = 0;
  for (let n = 1; n < position && from < text.length; n++) {
    from += (text.codePointAt(from) ?? 0) > 0xffff ? 2 : 1;
  }
  if (from >= text.length) return { from: Math.max(0, text.length - 1), to: text.length };
  const m = /^(?:"[^"\n]*"?|'[^'\n]*'?|[\p{L}\p{N}_$]+)/u.exec(text.slice(from, from + 200));
  return { from, to: from + (m ? m[0].length : 1) };
}
