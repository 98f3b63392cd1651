// A modal that asks for the name of what is about to be deleted: typing it is the
// confirmation, so that a stray Enter or click deletes nothing.
import { useEffect, useRef, useState } from "preact/hooks";
import { useAction } from "../hooks";
import { ErrorBox } from "./ui";

export function ConfirmByName(props: {
  what: string;  // "topic", "group"
  name: string;
  consequence: string;
  onConfirm: () => Promise<unknown>;
  onDone: () => void;
  onCancel: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState("");
  const action = useAction();
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  const matches = typed === props.name;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!matches) return;
    const done = await action.run(props.onConfirm);
    if (done.ok) props.onDone();
  };
  return (
    <dialog ref={dialog} class="confirm" onClose={props.onCancel} aria-labelledby="confirm-title">
      <form onSubmit={submit}>
        <h2 id="confirm-title">
          Delete {props.what} <code>{props.name}</code>?
        </h2>
        <p>{props.consequence}</p>
        <label>
          Type the {props.what}'s name to confirm
          <input
            value={typed}
            autoFocus
            autoComplete="off"
            spellcheck={false}
            onInput={(e) => setTyped(e.currentTarget.value)}
          />
        </label>
        <ErrorBox error={action.error} />
        <div class="buttons">
          <button type="submit" class="danger" disabled={!matches || action.busy}>
            {action.busy ? "Deleting…" : `Delete ${props.what}`}
          </button>
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}
