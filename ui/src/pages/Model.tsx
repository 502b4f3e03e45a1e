// #/models/NAME: one model (GET /models/NAME/versions: the model and its versions; "not found"
// when it does not exist or the caller may not see it): description, labels, metadata, notes,
// and its versions (number, name, the checkpoint with its trial and experiment, comment, notes,
// who registered it and when). A form registers a COMPLETED checkpoint by UUID as the next
// version (POST /models/NAME/versions); Delete removes a version after confirm
// (DELETE /models/NAME/versions/N). Edit changes the model (ModelEdit's EditModel; a new name
// moves the page to its new address) and Edit on a row a version's name, comment, labels,
// metadata and notes; Archive / Unarchive (POST /models/NAME/archive|unarchive); Move to another
// workspace (GET /workspaces for the choice, POST /models/NAME/move {destinationWorkspaceId});
// Delete the model and its versions after confirm (DELETE /models/NAME), then back to the
// Models list. Refusals show the master's reason.
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll, useShell } from "../app";
import { Summary, Table, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";
import { when } from "../format";
import { EditModel, EditVersion } from "./ModelEdit";
import { labelList, type Model } from "./Models";

interface Workspace { id: number; name: string; archived?: boolean }

interface Version {
  id: number; version: number; name?: string; comment?: string; notes?: string; labels?: string[]; metadata?: Record<string, unknown>;
  creationTime?: string; username?: string | null;
  checkpoint: { uuid: string; state?: string; training?: { trialId?: number; experimentId?: number } };
}

export function ModelPage() {
  const name = useParams().name ?? "";
  const { toast, handle } = useShell();
  const [model, setModel] = useState<Model | null | "missing">(null);
  const [versions, setVersions] = useState<Version[]>([]);
  const [form, setForm] = useState({ uuid: "", name: "", comment: "", labels: "" });
  const [error, setError] = useState("");
  const [editing, setEditing] = useState(false);
  const [editingVersion, setEditingVersion] = useState<number | null>(null);
  const [actionError, setActionError] = useState("");
  const [busy, setBusy] = useState(false);
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [destination, setDestination] = useState("");
  const navigate = useNavigate();
  useTitle(`Model ${name} · Stalwart`);
  const path = `/models/${encodeURIComponent(name)}`;

  const refresh = usePoll(async (signal) => {
    try {
      const answer = await api.get<{ model: Model; modelVersions?: Version[] }>(`${path}/versions`, signal);
      if (signal.aborted) return;
      setModel(answer.model);
      setVersions(answer.modelVersions ?? []);
    } catch (err) {
      if (isApiError(err, 404)) { setModel("missing"); return false; }
      throw err;
    }
  }, `model-${name}`);
  usePoll(async (signal) => {
    const answer = await api.get<{ workspaces?: Workspace[] }>("/workspaces", signal);
    if (!signal.aborted) setWorkspaces(answer.workspaces ?? []);
    return false;
  }, "workspaces");

  if (model === "missing") {
    return (
      <>
        <h1>Model not found</h1>
        <p id="model-missing">There is no model “{name}” that you can see. <Link to="/models">All models</Link>.</p>
      </>
    );
  }
  const register = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    try {
      const answer = await api.post<{ modelVersion: Version }>(`${path}/versions`, {
        checkpointUuid: form.uuid.trim(), name: form.name.trim() || undefined,
        comment: form.comment.trim() || undefined, labels: labelList(form.labels),
      });
      toast(`Registered version ${answer.modelVersion.version} of ${name}`);
      setForm({ uuid: "", name: "", comment: "", labels: "" });
      refresh();
    } catch (err) {
      const message = refusal(err, "register the checkpoint");
      if (message) setError(message); else handle(err);
    }
  };
  const remove = async (v: Version): Promise<void> => {
    if (!window.confirm(`Delete version ${v.version} of model ${name}? Its checkpoint stays.`)) return;
    setError("");
    try {
      await api.call("DELETE", `${path}/versions/${v.version}`);
      toast(`Deleted version ${v.version} of ${name}`);
      refresh();
    } catch (err) {
      const message = refusal(err, `delete version ${v.version}`);
      if (message) setError(message); else handle(err);
    }
  };

  const archive = async (archived: boolean): Promise<void> => {
    const verb = archived ? "archive" : "unarchive";
    setActionError("");
    setBusy(true);
    try {
      await api.post(`${path}/${verb}`, {});
      toast(`${archived ? "Archived" : "Unarchived"} model ${name}`);
      if (archived) setEditing(false);
      refresh();
    } catch (err) {
      const message = refusal(err, `${verb} model ${name}`);
      if (message) setActionError(message); else handle(err);
    } finally {
      setBusy(false);
    }
  };
  const move = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const target = workspaces.find((w) => String(w.id) === destination);
    if (!target) return;
    setActionError("");
    setBusy(true);
    try {
      await api.post(`${path}/move`, { destinationWorkspaceId: target.id });
      toast(`Moved model ${name} to workspace ${target.name}`);
      setDestination("");
      refresh();
    } catch (err) {
      const message = refusal(err, `move model ${name}`);
      if (message) setActionError(message); else handle(err);
    } finally {
      setBusy(false);
    }
  };
  const removeModel = async (): Promise<void> => {
    const count = versions.length;
    if (!window.confirm(`Delete model ${name}${count ? ` and its ${count} version${count === 1 ? "" : "s"}` : ""}? Their checkpoints stay.`)) return;
    setActionError("");
    setBusy(true);
    try {
      await api.call("DELETE", path);
      toast(`Deleted model ${name}`);
      navigate("/models");
    } catch (err) {
      const message = refusal(err, `delete model ${name}`);
      if (message) setActionError(message); else handle(err);
      setBusy(false);
    }
  };
  const saved = (m: Model): void => {
    setEditing(false);
    if (m.name !== name) navigate(`/models/${encodeURIComponent(m.name)}`, { replace: true });
    else { setModel(m); refresh(); }
  };

  const m = model;
  const shownVersion = versions.find((v) => v.version === editingVersion);
  const metadata = m ? Object.entries(m.metadata ?? {}) : [];
  const home = m ? workspaces.find((w) => w.id === m.workspaceId) : undefined;
  const elsewhere = workspaces.filter((w) => w.id !== m?.workspaceId && !w.archived);
  return (
    <>
      <p><Link to="/models">← Models</Link></p>
      <h1 id="model-title">Model {name}{m?.archived ? " (archived)" : ""}</h1>
      {m && <Summary facts={[
        ["Description", m.description ?? ""], ["Labels", (m.labels ?? []).join(", ")], ["Owner", m.username ?? ""],
        ["Workspace", home ? home.name : String(m.workspaceId ?? "")], ["Created", when(m.creationTime)], ["Last updated", when(m.lastUpdatedTime)],
      ]} />}
      {m?.archived && (
        <p className="archived-note" id="model-archived">Archived: the model takes no changes and no new versions until it is unarchived (its versions can still be edited and used).</p>
      )}
      {m && (
        <div className="model-actions">
          <button type="button" id="model-edit-open" aria-expanded={editing} disabled={m.archived || editing} title={m.archived ? "Unarchive the model to edit it" : undefined}
            onClick={() => { setActionError(""); setEditing(true); }}>Edit model</button>
          {m.archived
            ? <button type="button" id="model-unarchive" disabled={busy} onClick={() => void archive(false)}>Unarchive model</button>
            : <button type="button" id="model-archive" disabled={busy} onClick={() => void archive(true)}>Archive model</button>}
          <button type="button" className="danger" id="model-delete" disabled={busy} onClick={() => void removeModel()}>Delete model</button>
          <form className="inline-form" id="model-move" aria-label={`Move model ${name}`} onSubmit={(e) => void move(e)}>
            <label htmlFor="model-move-to">Move to workspace</label>
            <select id="model-move-to" value={destination} onChange={(e) => setDestination(e.target.value)}>
              <option value="">Pick a workspace</option>
              {elsewhere.map((w) => <option key={w.id} value={String(w.id)}>{w.name}</option>)}
            </select>
            <button type="submit" disabled={busy || !destination}>Move model</button>
          </form>
        </div>
      )}
      <p className="error" role="alert" id="model-error">{actionError}</p>
      {m && editing && <EditModel model={m} done={saved} cancel={() => setEditing(false)} />}
      <h2 id="metadata-title">Metadata</h2>
      {metadata.length > 0
        ? <Table id="model-metadata" labelledBy="metadata-title" columns={["Key", "Value"]}>
            {metadata.map(([k, v]) => <tr key={k} data-key={k}><td>{k}</td><td className="mono">{JSON.stringify(v)}</td></tr>)}
          </Table>
        : <p className="muted" id="model-metadata-empty">No metadata.</p>}
      <h2 id="notes-title">Notes</h2>
      {m?.notes ? <pre className="config" id="model-notes">{m.notes}</pre> : <p className="muted">No notes.</p>}
      <h2 id="versions-title">Versions</h2>
      <Table id="versions" labelledBy="versions-title" columns={["Version", "Name", "Checkpoint", "Trial", "Comment", "Labels", "Notes", "Metadata", "Registered", "Actions"]}>
        {versions.map((v) => {
          const trial = v.checkpoint.training?.trialId;
          return (
            <tr key={v.id} data-key={v.version}>
              <td className="num">{v.version}</td>
              <td>{v.name ?? ""}</td>
              <td className="mono">{v.checkpoint.uuid}</td>
              <td>{trial ? <Link to={`/trials/${trial}`}>Trial {trial}</Link> : ""}</td>
              <td>{v.comment ?? ""}</td>
              <td>{(v.labels ?? []).join(", ")}</td>
              <td>{v.notes ?? ""}</td>
              <td className="mono">{Object.entries(v.metadata ?? {}).map(([k, x]) => `${k}: ${JSON.stringify(x)}`).join(", ")}</td>
              <td>{`${when(v.creationTime)}${v.username ? ` by ${v.username}` : ""}`}</td>
              <td>
                <div className="actions">
                  <button type="button" data-action="edit" aria-label={`Edit version ${v.version}`} aria-expanded={editingVersion === v.version}
                    onClick={() => setEditingVersion(v.version)}>Edit</button>
                  <button type="button" className="danger" data-action="delete" aria-label={`Delete version ${v.version}`} onClick={() => void remove(v)}>Delete</button>
                </div>
              </td>
            </tr>
          );
        })}
      </Table>
      {shownVersion && (
        <EditVersion key={shownVersion.version} model={name} version={shownVersion}
          done={() => { setEditingVersion(null); refresh(); }} cancel={() => setEditingVersion(null)} />
      )}
      {m && versions.length === 0 && <p className="empty">No versions yet: register a checkpoint below or with `det model register-version`.</p>}
      <h2 id="version-new-title">Register a checkpoint</h2>
      <form className="controls" id="version-form" aria-labelledby="version-new-title" onSubmit={(e) => void register(e)}>
        <Field id="version-uuid" label="Checkpoint UUID">
          <input id="version-uuid" name="uuid" type="text" required size={38} className="mono" value={form.uuid} onChange={(e) => setForm((f) => ({ ...f, uuid: e.target.value }))} />
        </Field>
        <Field id="version-name" label="Version name">
          <input id="version-name" name="name" type="text" size={14} value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} />
        </Field>
        <Field id="version-comment" label="Comment">
          <input id="version-comment" name="comment" type="text" size={20} value={form.comment} onChange={(e) => setForm((f) => ({ ...f, comment: e.target.value }))} />
        </Field>
        <Field id="version-labels" label="Version labels">
          <input id="version-labels" name="labels" type="text" size={14} value={form.labels} onChange={(e) => setForm((f) => ({ ...f, labels: e.target.value }))} />
        </Field>
        <button type="submit" className="primary">Register version</button>
      </form>
      <p className="error" role="alert" id="version-error">{error}</p>
    </>
  );
}
