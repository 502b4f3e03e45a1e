// The model page's forms: EditModel (name, description, labels, metadata as key/value rows,
// notes: PATCH /models/NAME) and EditVersion (a version's name, comment, labels, metadata and
// notes: PATCH /models/NAME/versions/N); both edit metadata with MetadataFields. A refusal of the master (no role to change the model, a
// name another model has, an archived model) is shown in the form with its reason.
import { useRef, useState } from "react";
import * as api from "../api";
import { useShell } from "../app";
import { refusal } from "../components/Field";
import { labelList, type Model } from "./Models";
import "./models.css";

/** A metadata value as typed in its field: text as it is, anything else (and text that would
 * read as JSON, such as "1") as JSON, so that `metaValue(metaText(v))` is `v`. */
export function metaText(value: unknown): string {
  if (typeof value === "string") {
    try { JSON.parse(value); } catch { return value; }
  }
  return JSON.stringify(value) ?? "";
}

/** A typed metadata value: JSON when it reads as JSON (a number, true, a list, "quoted"),
 * else the text itself. */
export function metaValue(text: string): unknown {
  try { return JSON.parse(text) as unknown; } catch { return text; }
}

interface Row { id: number; key: string; value: string }

/** The rows as a metadata mapping, or the reason they are not one. */
export function rowsToMetadata(rows: Row[]): Record<string, unknown> | string {
  const metadata: Record<string, unknown> = {};
  for (const row of rows) {
    const key = row.key.trim();
    if (!key) {
      if (row.value.trim()) return `The metadata value “${row.value}” has no key.`;
      continue;
    }
    if (key in metadata) return `The metadata key “${key}” is given twice.`;
    metadata[key] = metaValue(row.value);
  }
  return metadata;
}

/** Metadata as key/value rows being edited: `rows`, and `fields(prefix)` the fieldset that edits
 * them (ids `PREFIX-metadata`, `PREFIX-add-key`). */
function useMetadataRows(initial: Record<string, unknown> | undefined) {
  const next = useRef(0);
  const row = (key: string, value: string): Row => ({ id: next.current++, key, value });
  const [rows, setRows] = useState<Row[]>(() => Object.entries(initial ?? {}).map(([k, v]) => row(k, metaText(v))));
  const setRow = (id: number, patch: Partial<Row>): void => setRows((rs) => rs.map((r) => (r.id === id ? { ...r, ...patch } : r)));
  const fields = (prefix: string): React.ReactNode => (
    <fieldset id={`${prefix}-metadata`}>
      <legend>Metadata</legend>
      <p className="muted hint-line">A value that reads as JSON (<code>3</code>, <code>true</code>, <code>[1, 2]</code>, <code>"quoted"</code>) is kept as such; anything else is text.</p>
      {rows.map((r, i) => (
        <div className="meta-row" key={r.id} data-row={i}>
          <input aria-label={`Metadata key ${i + 1}`} placeholder="key" value={r.key} onChange={(e) => setRow(r.id, { key: e.target.value })} />
          <input aria-label={`Metadata value ${i + 1}`} placeholder="value" className="mono" value={r.value} onChange={(e) => setRow(r.id, { value: e.target.value })} />
          <button type="button" aria-label={`Remove metadata row ${i + 1}`} onClick={() => setRows((rs) => rs.filter((x) => x.id !== r.id))}>Remove</button>
        </div>
      ))}
      <button type="button" id={`${prefix}-add-key`} onClick={() => setRows((rs) => [...rs, row("", "")])}>Add a key</button>
    </fieldset>
  );
  return { rows, fields };
}

export function EditModel({ model, done, cancel }: { model: Model; done: (saved: Model) => void; cancel: () => void }) {
  const { toast, handle } = useShell();
  const [name, setName] = useState(model.name);
  const [description, setDescription] = useState(model.description ?? "");
  const [labels, setLabels] = useState((model.labels ?? []).join(", "));
  const [notes, setNotes] = useState(model.notes ?? "");
  const { rows, fields } = useMetadataRows(model.metadata);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  const save = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    const newName = name.trim();
    if (!newName) { setError("The name cannot be empty."); return; }
    const metadata = rowsToMetadata(rows);
    if (typeof metadata === "string") { setError(metadata); return; }
    setBusy(true);
    try {
      const answer = await api.call<{ model: Model }>("PATCH", `/models/${encodeURIComponent(model.name)}`, {
        ...(newName !== model.name ? { name: newName } : {}),
        description, notes, labels: labelList(labels), metadata,
      });
      toast(`Saved model ${answer.model.name}`);
      done(answer.model);
    } catch (err) {
      const message = refusal(err, `change model ${model.name}`);
      if (message) setError(message); else handle(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="edit-form model-edit" id="model-edit" aria-label={`Edit model ${model.name}`} onSubmit={(e) => void save(e)}>
      <label htmlFor="model-edit-name">Name</label>
      <input id="model-edit-name" value={name} required onChange={(e) => setName(e.target.value)} />
      <label htmlFor="model-edit-description">Description</label>
      <textarea id="model-edit-description" rows={2} value={description} onChange={(e) => setDescription(e.target.value)} />
      <label htmlFor="model-edit-labels">Labels (comma-separated)</label>
      <input id="model-edit-labels" value={labels} onChange={(e) => setLabels(e.target.value)} />
      {fields("model-edit")}
      <label htmlFor="model-edit-notes">Notes</label>
      <textarea id="model-edit-notes" rows={6} className="mono" value={notes} onChange={(e) => setNotes(e.target.value)} />
      <p className="error" role="alert" id="model-edit-error">{error}</p>
      <div className="dialog-actions">
        <button type="button" onClick={cancel}>Cancel</button>
        <button type="submit" className="primary" disabled={busy}>Save model</button>
      </div>
    </form>
  );
}

export interface VersionFields {
  version: number; name?: string; comment?: string; notes?: string; labels?: string[]; metadata?: Record<string, unknown>;
}

export function EditVersion({ model, version, done, cancel }: {
  model: string; version: VersionFields; done: () => void; cancel: () => void;
}) {
  const { toast, handle } = useShell();
  const [form, setForm] = useState({
    name: version.name ?? "", comment: version.comment ?? "", notes: version.notes ?? "", labels: (version.labels ?? []).join(", "),
  });
  const { rows, fields } = useMetadataRows(version.metadata);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const n = version.version;

  const save = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    const metadata = rowsToMetadata(rows);
    if (typeof metadata === "string") { setError(metadata); return; }
    setBusy(true);
    try {
      await api.call("PATCH", `/models/${encodeURIComponent(model)}/versions/${n}`, {
        name: form.name, comment: form.comment, notes: form.notes, labels: labelList(form.labels), metadata,
      });
      toast(`Saved version ${n} of ${model}`);
      done();
    } catch (err) {
      const message = refusal(err, `change version ${n}`);
      if (message) setError(message); else handle(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="edit-form model-edit" id="version-edit" aria-label={`Edit version ${n}`} onSubmit={(e) => void save(e)}>
      <h3>Version {n}</h3>
      <label htmlFor="version-edit-name">Name</label>
      <input id="version-edit-name" value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} />
      <label htmlFor="version-edit-comment">Comment</label>
      <input id="version-edit-comment" value={form.comment} onChange={(e) => setForm((f) => ({ ...f, comment: e.target.value }))} />
      <label htmlFor="version-edit-labels">Labels (comma-separated)</label>
      <input id="version-edit-labels" value={form.labels} onChange={(e) => setForm((f) => ({ ...f, labels: e.target.value }))} />
      {fields("version-edit")}
      <label htmlFor="version-edit-notes">Notes</label>
      <textarea id="version-edit-notes" rows={4} className="mono" value={form.notes} onChange={(e) => setForm((f) => ({ ...f, notes: e.target.value }))} />
      <p className="error" role="alert" id="version-edit-error">{error}</p>
      <div className="dialog-actions">
        <button type="button" onClick={cancel}>Cancel</button>
        <button type="submit" className="primary" disabled={busy}>Save version</button>
      </div>
    </form>
  );
}
