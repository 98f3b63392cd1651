// The pipeline editor's box: loads CodeMirror (components/editor.ts, a chunk of its own)
// when first shown and hands the page a handle to it.
import { useEffect, useRef, useState } from "preact/hooks";
import { useTheme } from "../theme";
import type { LineProblem, YamlEditor } from "./editor";

export type { LineProblem, YamlEditor };

let loading: Promise<typeof import("./editor")> | null = null;

// The editor's module, fetched once per page load; a failed fetch is tried again next time.
function loadEditor(): Promise<typeof import("./editor")> {
  if (!loading) {
    loading = import("./editor").catch((e: unknown) => {
      loading = null;
      throw e;
    });
  }
  return loading;
}

export function YamlBox(props: {
  initial: string;  // the text it starts with (later changes of this prop are ignored)
  label: string;
  problems: LineProblem[];
  onChange: (text: string) => void;
  onRun: () => void;
  onReady?: (editor: YamlEditor) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const [editor, setEditor] = useState<YamlEditor | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const theme = useTheme();
  // The latest callbacks, for an editor made once.
  const cb = useRef(props);
  cb.current = props;

  useEffect(() => {
    let made: YamlEditor | null = null;
    let gone = false;
    loadEditor().then(
      (m) => {
        if (gone || !host.current) return;
        made = m.createYamlEditor(host.current, {
          text: props.initial,
          dark: theme === "dark",
          label: props.label,
          onChange: (text) => cb.current.onChange(text),
          onRun: () => cb.current.onRun(),
        });
        setEditor(made);
        cb.current.onReady?.(made);
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

  useEffect(() => {
    editor?.setProblems(props.problems);
  }, [editor, props.problems]);

  return (
    <>
      {!editor && !failed && <p class="muted">loading the editor…</p>}
      {failed && (
        <div class="error" role="alert">
          <strong>The editor could not be loaded</strong>: {failed}
          <p>
            The page may be older than the server (sluice was upgraded):{" "}
            <button type="button" class="small" onClick={() => location.reload()}>
              Reload the page
            </button>
          </p>
        </div>
      )}
      <div class="yaml-editor" data-testid="pipeline-editor" ref={host} />
    </>
  );
}
