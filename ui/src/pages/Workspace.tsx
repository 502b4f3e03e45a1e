// #/workspaces/ID: one workspace (GET /workspaces/ID; "not found" when it does not exist or the
// caller has no role there) and its projects (GET /workspaces/ID/projects), with a form that
// creates one (POST /workspaces/ID/projects) and, per project, Move to another workspace
// (POST /projects/ID/move {destinationWorkspaceId}). The workspace's own actions: Rename (PATCH
// /workspaces/ID {name}), Archive/Unarchive (POST /workspaces/ID/archive|unarchive) and Delete
// (DELETE /workspaces/ID after confirm; the master refuses while it holds experiments, models or
// running tasks, and the page shows why; once deleted the page goes to the Workspaces list); and
// its role assignments (WorkspaceRoles).
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll, useShell } from "../app";
import { Breadcrumbs } from "../components/Breadcrumbs";
import { LabelledSelect, Table, useTitle } from "../components/common";
import { Field, refusal, useAction } from "../components/Field";
import { WorkspaceRoles } from "./WorkspaceRoles";
import { workspaces, type Workspace } from "./Workspaces";

export interface Project {
  id: number; name: string; description?: string; workspaceId: number; workspaceName?: string;
  archived?: boolean; immutable?: boolean; numExperiments?: number; numActiveExperiments?: number; username?: string;
}

export function WorkspacePage() {
  const id = Number(useParams().id);
  const { toast, handle } = useShell();
  const [ws, setWs] = useState<Workspace | null | "missing">(null);
  const [projects, setProjects] = useState<Project[]>([]);
  const [others, setOthers] = useState<Workspace[]>([]);
  const [form, setForm] = useState({ name: "", description: "" });
  const [moveTo, setMoveTo] = useState<Record<number, string>>({});
  const [error, setError] = useState("");
  const { error: pageError, run: act } = useAction();
  const [rename, setRename] = useState<string | null>(null);  // the name being typed, null: not editing
  const navigate = useNavigate();
  useTitle(`${ws && ws !== "missing" ? ws.name : `Workspace ${id}`} · Stalwart`);

  const refresh = usePoll(async (signal) => {
    try {
      const [one, list, all] = await Promise.all([
        api.get<{ workspace: Workspace }>(`/workspaces/${id}`, signal),
        api.get<{ projects?: Project[] }>(`/workspaces/${id}/projects`, signal),
        workspaces(false, signal),
      ]);
      if (signal.aborted) return;
      setWs(one.workspace);
      setProjects(list.projects ?? []);
      setOthers(all.filter((w) => w.id !== id));
    } catch (err) {
      if (isApiError(err, 404) || isApiError(err, 400)) { setWs("missing"); return false; }
      throw err;
    }
  }, `workspace-${id}`);

  if (ws === "missing") {
    return (
      <>
        <h1>Workspace not found</h1>
        <p id="workspace-missing">There is no workspace {id} that you can see. <Link to="/workspaces">All workspaces</Link>.</p>
      </>
    );
  }
  const create = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    try {
      const answer = await api.post<{ project: Project }>(`/workspaces/${id}/projects`, { name: form.name.trim(), description: form.description.trim(), workspaceId: id });
      toast(`Created project ${answer.project.name}`);
      setForm({ name: "", description: "" });
      refresh();
    } catch (err) {
      const message = refusal(err, "create the project");
      if (message) setError(message); else handle(err);
    }
  };
  const move = async (p: Project): Promise<void> => {
    const target = others.find((w) => String(w.id) === (moveTo[p.id] ?? String(others[0]?.id ?? "")));
    if (!target) return;
    setError("");
    try {
      await api.post(`/projects/${p.id}/move`, { destinationWorkspaceId: target.id, projectId: p.id });
      toast(`Moved project ${p.name} to workspace ${target.name}`);
      refresh();
    } catch (err) {
      const message = refusal(err, `move project ${p.name}`);
      if (message) setError(message); else handle(err);
    }
  };

  const own = ws;
  const saveName = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!own || rename === null) return;
    const name = rename.trim();
    if (await act(`rename workspace ${own.name}`, () => api.call("PATCH", `/workspaces/${id}`, { name }), `Renamed workspace ${own.name} to ${name}`)) {
      setRename(null);
      refresh();
    }
  };
  const archive = async (): Promise<void> => {
    if (!own) return;
    const verb = own.archived ? "unarchive" : "archive";
    if (verb === "archive" && !window.confirm(`Archive workspace ${own.name}? It takes no new projects or tasks until unarchived.`)) return;
    if (await act(`${verb} workspace ${own.name}`, () => api.post(`/workspaces/${id}/${verb}`), `Workspace ${own.name}: ${verb}d`)) refresh();
  };
  const remove = async (): Promise<void> => {
    if (!own || !window.confirm(`Delete workspace ${own.name}? Its empty projects go with it; this cannot be undone.`)) return;
    if (await act(`delete workspace ${own.name}`, () => api.call("DELETE", `/workspaces/${id}`), `Deleted workspace ${own.name}`)) {
      navigate("/workspaces");
    }
  };

  const options: [string, string][] = others.map((w) => [String(w.id), w.name]);
  return (
    <>
      <Breadcrumbs crumbs={[{ to: "/workspaces", label: "Workspaces" }, { label: ws?.name ?? `Workspace ${id}` }]} />
      <h1 id="workspace-title">{ws ? `Workspace ${ws.name}` : `Workspace ${id}`}{ws?.archived ? " (archived)" : ""}</h1>
      {own && (
        <div className="toolbar" id="workspace-actions">
          <button type="button" data-action="rename" aria-expanded={rename !== null} onClick={() => setRename(rename === null ? own.name : null)}>Rename</button>
          <button type="button" data-action={own.archived ? "unarchive" : "archive"} className={own.archived ? undefined : "danger"}
            disabled={own.immutable} onClick={() => void archive()}>{own.archived ? "Unarchive" : "Archive"}</button>
          <button type="button" className="danger" data-action="delete" disabled={own.immutable} onClick={() => void remove()}>Delete</button>
        </div>
      )}
      {own && rename !== null && (
        <form className="controls" id="workspace-rename" aria-label={`Rename workspace ${own.name}`} onSubmit={(e) => void saveName(e)}>
          <Field id="workspace-new-name" label="New name">
            <input id="workspace-new-name" type="text" required size={24} value={rename} onChange={(e) => setRename(e.target.value)} />
          </Field>
          <button type="submit" className="primary">Save name</button>
          <button type="button" onClick={() => setRename(null)}>Cancel</button>
        </form>
      )}
      <p className="error" role="alert" id="workspace-page-error">{pageError}</p>
      <h2 id="projects-title">Projects</h2>
      <Table id="projects" labelledBy="projects-title" columns={["ID", "Name", "Description", "Experiments", "Owner", "Move to", "Actions"]}>
        {projects.map((p) => (
          <tr key={p.id} data-key={p.id}>
            <td className="num">{p.id}</td>
            <td><Link to={`/projects/${p.id}`}>{p.name}</Link>{p.archived ? <span className="muted"> (archived)</span> : null}</td>
            <td>{p.description ?? ""}</td>
            <td className="num">{p.numExperiments ?? 0}</td>
            <td>{p.username ?? ""}</td>
            <td>
              {options.length > 0 && (
                <LabelledSelect id={`move-${p.id}`} label={`Move project ${p.name} to`} value={moveTo[p.id] ?? ""} options={options}
                  onChange={(v) => setMoveTo((m) => ({ ...m, [p.id]: v }))} />
              )}
            </td>
            <td>
              <button type="button" data-action="move" aria-label={`Move project ${p.name}`} disabled={options.length === 0 || p.immutable}
                onClick={() => void move(p)}>Move</button>
            </td>
          </tr>
        ))}
      </Table>
      {ws && projects.length === 0 && <p className="empty">No projects in this workspace yet: create one below or with `det project create`.</p>}
      <h2 id="project-new-title">New project</h2>
      <form className="controls" id="project-form" aria-labelledby="project-new-title" onSubmit={(e) => void create(e)}>
        <Field id="project-name" label="Name">
          <input id="project-name" name="name" type="text" required size={20} value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} />
        </Field>
        <Field id="project-description" label="Description">
          <input id="project-description" name="description" type="text" size={30} value={form.description} onChange={(e) => setForm((f) => ({ ...f, description: e.target.value }))} />
        </Field>
        <button type="submit" className="primary">Create project</button>
      </form>
      <p className="error" role="alert" id="project-error">{error}</p>
      {own && <WorkspaceRoles workspaceId={id} name={own.name} />}
    </>
  );
}
