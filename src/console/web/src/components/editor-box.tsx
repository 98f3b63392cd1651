// What the editor boxes (yaml-box.tsx, sql-box.tsx) share: CodeMirror (editor.ts, a chunk
// of its own) fetched when the first editor is shown, an editor made once in a host
// element, kept in the page's theme, and what the page shows while it loads or when the
// chunk cannot be fetched.
import { useEffect, useRef, useState } from "preact/hooks";
import { useTheme } from "../theme";
import type { Editor } from "./editor";

type EditorModule = typeof import("./editor");

let loading: Promise<EditorModule> | null = null;

// The editor's module, fetched once per page load; a failed fetch is tried again next time.
function loadEditor(): Promise<EditorModule> {
  if (!loading) {
    loading = import("./editor").catch((e: unknown) => {
      loading = null;
      throw e;
    });
  }
  return loading;
}

// Makes an editor with `make` in `host` once the module is there (the latest `make`
// given; later ones are ignored), and destroys it with the component.
export function useEditor<E extends Editor>(
  host: { current: HTMLElement | null },
  make: (m: EditorModule, host: HTMLElement, dark: boolean) => E,
): { editor: E | null; failed: string | null } {
  const [editor, setEditor] = useState<E | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const theme = useTheme();
  const makeRef = useRef(make);
  makeRef.current = make;
  const themeRef = useRef(theme);
  themeRef.current = theme;

  useEffect(() => {
    let made: E | null = null;
    let gone = false;
    loadEditor().then(
      (m) => {
        if (gone || !host.current) return;
        made = makeRef.current(m, host.current, themeRef.current === "dark");
        setEditor(made);
      },
      (e: unknown) => {
        if (!gone) setFailed(String(e));
      },
    );
    return () => {
      gone = true;
      made?.destroy();
    };
  }, []);

  useEffect(() => {
    editor?.setDark(theme === "dark");
  }, [editor, theme]);

  return { editor, failed };
}

// "loading the editor…" until it is there, or why it could not be loaded.
export function EditorStatus(props: { ready: boolean; failed: string | null }) {
  if (props.failed) {
    return (
      <div class="error" role="alert">
        <strong>The editor could not be loaded</strong>: {props.failed}
        <p>
          The page may be older than the server (sluice was upgraded):{" "}
          <button type="button" class="small" onClick={() => location.reload()}>
            Reload the page
          </button>
        </p>
      </div>
    );
  }
  return props.ready ? null : <p class="muted">loading the editor…</p>;
}
