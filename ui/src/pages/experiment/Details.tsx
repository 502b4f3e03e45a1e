// The experiment page's Config and Notes tabs, and the form that edits the experiment's name,
// description and labels (PATCH /api/v1/experiments/ID).
import { useState } from "react";
import * as api from "../../api";
import { useShell } from "../../app";
import "../../components/debug.css";
import type { Experiment } from "../../wire";

export function ConfigTab({ e }: { e: Experiment }) {
  return (
    <>
      <h2 id="config-title">Config</h2>
      <p className="muted">The experiment&apos;s configuration as it was submitted (YAML).</p>
      <pre className="config" id="config" aria-labelledby="config-title">{e.originalConfig ?? ""}</pre>
      <details>
        <summary>Full configuration, with the master&apos;s defaults (JSON)</summary>
        <pre className="config" id="config-full">{JSON.stringify(e.config ?? {}, null, 2)}</pre>
      </details>
    </>
  );
}

/** Notes are read-only: this master refuses to store experiment notes (PATCH answers 400). */
export function NotesTab({ notes }: { notes: string }) {
  return (
    <>
      <h2 id="notes-title">Notes</h2>
      <p className="muted" id="notes-readonly">Notes are read-only here: this master does not store experiment notes yet. Use the description for what others should know.</p>
      {notes ? <div className="notes" id="notes">{notes}</div> : <p className="empty" id="notes">No notes.</p>}
    </>
  );
}

/** Split labels typed as `a, b ,c` into distinct non-empty labels. */
export function parseLabels(text: string): string[] {
  return [...new Set(text.split(",").map((l) => l.trim()).filter(Boolean))];
}

/** Edit name, description and labels; `done` gets the experiment as the master answered. */
export function EditExperiment({ e, done, cancel }: { e: Experiment & { description?: string | null }; done: (e: Experiment) => void; cancel: () => void }) {
  const { toast, handle } = useShell();
  const [name, setName] = useState(e.name);
  const [description, setDescription] = useState(e.description ?? "");
  const [labels, setLabels] = useState((e.labels ?? []).join(", "));
  const [busy, setBusy] = useState(false);
  const save = async (): Promise<void> => {
    if (!name.trim()) { toast("The name cannot be empty"); return; }
    setBusy(true);
    try {
      const answer = await api.call<{ experiment: Experiment }>("PATCH", `/experiments/${e.id}`,
        { name: name.trim(), description, labels: parseLabels(labels) });
      toast(`Experiment ${e.id} saved`);
      done(answer.experiment);
    } catch (err) { handle(err); } finally { setBusy(false); }
  };
  return (
    <form className="edit-form" id="edit-experiment" aria-label={`Edit experiment ${e.id}`}
      onSubmit={(ev) => { ev.preventDefault(); void save(); }}>
      <label htmlFor="edit-name">Name</label>
      <input id="edit-name" value={name} onChange={(ev) => setName(ev.target.value)} required />
      <label htmlFor="edit-description">Description</label>
      <textarea id="edit-description" rows={3} value={description} onChange={(ev) => setDescription(ev.target.value)} />
      <label htmlFor="edit-labels">Labels (comma-separated)</label>
      <input id="edit-labels" value={labels} onChange={(ev) => setLabels(ev.target.value)} />
      <div className="dialog-actions">
        <button type="button" onClick={cancel}>Cancel</button>
        <button type="submit" className="primary" disabled={busy}>Save</button>
      </div>
    </form>
  );
}
