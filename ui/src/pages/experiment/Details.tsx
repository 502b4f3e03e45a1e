// The experiment page's Config and Notes tabs (notes edited in place), and the form that edits
// the experiment's name, description and labels (PATCH /api/v1/experiments/ID).
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

/** The experiment's notes (free text, kept by the master): shown, and edited in place
 * (PATCH /api/v1/experiments/ID with `notes`); `saved` gets the experiment as answered. */
export function NotesTab({ e, saved }: { e: Experiment & { notes?: string; archived?: boolean }; saved: (e: Experiment) => void }) {
  const { toast, handle } = useShell();
  const notes = e.notes ?? "";
  const [draft, setDraft] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const save = async (): Promise<void> => {
    if (draft === null) return;
    setBusy(true);
    try {
      const answer = await api.call<{ experiment: Experiment }>("PATCH", `/experiments/${e.id}`, { notes: draft });
      toast(`Notes of experiment ${e.id} saved`);
      setDraft(null);
      saved(answer.experiment);
    } catch (err) { handle(err); } finally { setBusy(false); }
  };
  return (
    <>
      <h2 id="notes-title">Notes</h2>
      {draft === null ? (
        <>
          {notes ? <div className="notes" id="notes">{notes}</div> : <p className="empty" id="notes">No notes.</p>}
          <button type="button" id="notes-edit" onClick={() => setDraft(notes)} disabled={e.archived === true}
            title={e.archived === true ? "Unarchive the experiment to edit its notes" : undefined}>Edit notes</button>
        </>
      ) : (
        <>
          <label htmlFor="notes-text">Notes (plain text)</label>
          <textarea id="notes-text" rows={12} value={draft} onChange={(ev) => setDraft(ev.target.value)} />
          <div className="actions">
            <button type="button" id="notes-save" onClick={() => void save()} disabled={busy}>Save notes</button>
            <button type="button" onClick={() => setDraft(null)} disabled={busy}>Cancel</button>
          </div>
        </>
      )}
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
