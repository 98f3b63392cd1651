// The YAML editor of the pipeline pages: CodeMirror 6. Loaded with import() by
// components/yaml-box.tsx, so that CodeMirror is a chunk of its own (build.mjs) that only
// the editor pages fetch. Imports nothing of the page but types: whatever it imported would
// be split into a chunk shared with the page's script.
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
import { lintGutter, lintKeymap, setDiagnostics, type Diagnostic } from "@codemirror/lint";
import { tags as t } from "@lezer/highlight";

export interface LineProblem {
  line: number;  // 1-based
  message: string;
  severity: "error" | "warning";
}

export interface YamlEditor {
  text(): string;
  setText(text: string): void;
  // Replaces the problems shown: each as a lint diagnostic on its line (underlined, a
  // gutter marker, F8 moves to it) and its message in a block under the line.
  setProblems(problems: LineProblem[]): void;
  goToLine(line: number): void;
  setDark(dark: boolean): void;
  focus(): void;
  destroy(): void;
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
  ".cm-content, .cm-gutter": { minHeight: "320px" },
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
});

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

export function createYamlEditor(host: HTMLElement, opts: EditorOptions): YamlEditor {
  const root = host.shadowRoot ?? host.attachShadow({ mode: "open" });
  root.replaceChildren();
  const parent = document.createElement("div");
  root.append(parent);

  const dark = new Compartment();
  const darkTheme = (on: boolean): Extension => EditorView.theme({}, { dark: on });
  const extensions: Extension[] = [
    lineNumbers(),
    highlightActiveLineGutter(),
    highlightSpecialChars(),
    history(),
    drawSelection(),
    indentOnInput(),
    bracketMatching(),
    highlightActiveLine(),
    syntaxHighlighting(highlight),
    yaml(),
    lintGutter(),
    problemBlocks,
    EditorState.tabSize.of(2),
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
    // Tab indents (YAML has no tab characters: two spaces); Escape then Tab leaves the
    // editor, as CodeMirror does for keyboard users.
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
    state: EditorState.create({ doc: opts.text, extensions }),
  });

  return {
    text: () => view.state.doc.toString(),
    setText(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
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
    setDark(on) {
      view.dispatch({ effects: dark.reconfigure(darkTheme(on)) });
    },
    focus: () => view.focus(),
    destroy: () => view.destroy(),
  };
}
