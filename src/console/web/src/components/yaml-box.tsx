// The pipeline editor's box: CodeMirror with YAML (components/editor.ts, loaded when first
// shown) and a handle to it for the page.
import { useEffect, useRef } from "preact/hooks";
import type { LineProblem, YamlEditor } from "./editor";
import { EditorStatus, useEditor } from "./editor-box";

export type { LineProblem, YamlEditor };

export function YamlBox(props: {
  initial: string;  // the text it starts with (later changes of this prop are ignored)
  label: string;
  problems: LineProblem[];
  onChange: (text: string) => void;
  onRun: () => void;
  onReady?: (editor: YamlEditor) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  // The latest callbacks, for an editor made once.
  const cb = useRef(props);
  cb.current = props;
  const { editor, failed } = useEditor(host, (m, el, dark) => {
    const made = m.createYamlEditor(el, {
      text: props.initial,
      dark,
      label: props.label,
      onChange: (text) => cb.current.onChange(text),
      onRun: () => cb.current.onRun(),
    });
    cb.current.onReady?.(made);
    return made;
  });

  useEffect(() => {
    editor?.setProblems(props.problems);
  }, [editor, props.problems]);

  return (
    <>
      <EditorStatus ready={editor !== null} failed={failed} />
      <div class="yaml-editor" data-testid="pipeline-editor" ref={host} />
    </>
  );
}
