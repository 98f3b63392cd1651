// The SQL page's editor box: CodeMirror with SQL (components/editor.ts, loaded when first
// shown), completing the relations and columns it is given, and a handle to it for the
// page.
import { useEffect, useRef } from "preact/hooks";
import type { SqlRelation } from "../types";
import type { SqlEditor } from "./editor";
import { EditorStatus, useEditor } from "./editor-box";

export type { SqlEditor };

export function SqlBox(props: {
  initial: string;  // the text it starts with (later changes of this prop are ignored)
  relations: SqlRelation[];
  onChange: (text: string) => void;
  onRun: () => void;
  onReady: (editor: SqlEditor) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  // The latest callbacks, for an editor made once.
  const cb = useRef(props);
  cb.current = props;
  const { editor, failed } = useEditor(host, (m, el, dark) => {
    const made = m.createSqlEditor(el, {
      text: props.initial,
      dark,
      label: "SQL",
      onChange: (text) => cb.current.onChange(text),
      onRun: () => cb.current.onRun(),
    });
    cb.current.onReady(made);
    return made;
  });

  useEffect(() => {
    editor?.setSchema(props.relations);
  }, [editor, props.relations]);

  return (
    <>
      <EditorStatus ready={editor !== null} failed={failed} />
      <div class="sql-editor" data-testid="sql-editor" ref={host} />
    </>
  );
}
