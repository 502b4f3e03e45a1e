// #/projects/ID: one project (GET /projects/ID; "not found" when it does not exist or the caller
// has no role in its workspace), under breadcrumbs (Workspaces / WORKSPACE / PROJECT), with its
// description and its experiments: the experiments list narrowed to the project (projectId).
// The project's own actions: Edit its name and description (PATCH /projects/ID), Archive/Unarchive
// (POST /projects/ID/archive|unarchive) and Delete (DELETE /projects/ID after confirm; the master
// refuses while it holds experiments, and the page shows why; once deleted the page goes to its
// workspace).
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll } from "../app";
import { Breadcrumbs } from "../components/Breadcrumbs";
import { useTitle } from "../components/common";
import { Field, useAction } from "../components/Field";
import { ExperimentsPage } from "./Experiments";
import type { Project } from "./Workspace";

export function ProjectPage() {
  const id = Number(useParams().id);
  const [project, setProject] = useState<Project | null | "missing">(null);
  const [edit, setEdit] = useState<{ name: string; description: string } | null>(null);  // null: not editing
  const { error, run: act } = useAction();
  const navigate = useNavigate();
  useTitle(`${project && project !== "missing" ? project.name : `Project ${id}`} · Stalwart`);

  const refresh = usePoll(async (signal) => {
    try {
      const answer = await api.get<{ project: Project }>(`/projects/${id}`, signal);
      if (!signal.aborted) setProject(answer.project);
    } catch (err) {
      if (isApiError(err, 404) || isApiError(err, 400)) { setProject("missing"); return false; }
      throw err;
    }
  }, `project-${id}`);

  if (project === "missing") {
    return (
      <>
        <h1>Project not found</h1>
        <p id="project-missing">There is no project {id} that you can see. <Link to="/workspaces">All workspaces</Link>.</p>
      </>
    );
  }
  if (!project) return <h1>Project {id}</h1>;
  const save = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!edit) return;
    const change = { name: edit.name.trim(), description: edit.description.trim() };
    if (await act(`change project ${project.name}`, () => api.call("PATCH", `/projects/${id}`, change), `Saved project ${change.name}`)) {
      setEdit(null);
      refresh();
    }
  };
  const archive = async (): Promise<void> => {
    const verb = project.archived ? "unarchive" : "archive";
    if (verb === "archive" && !window.confirm(`Archive project ${project.name}? It takes no new experiments until unarchived.`)) return;
    if (await act(`${verb} project ${project.name}`, () => api.post(`/projects/${id}/${verb}`), `Project ${project.name}: ${verb}d`)) refresh();
  };
  const remove = async (): Promise<void> => {
    if (!window.confirm(`Delete project ${project.name}? This cannot be undone.`)) return;
    if (await act(`delete project ${project.name}`, () => api.call("DELETE", `/projects/${id}`), `Deleted project ${project.name}`)) {
      navigate(`/workspaces/${project.workspaceId}`);
    }
  };
  return (
    <>
      <Breadcrumbs crumbs={[
        { to: "/workspaces", label: "Workspaces" },
        { to: `/workspaces/${project.workspaceId}`, label: project.workspaceName ?? `Workspace ${project.workspaceId}` },
        { label: project.name },
      ]} />
      <h1 id="project-title">Project {project.name}{project.archived ? " (archived)" : ""}</h1>
      {project.description && <p id="project-description">{project.description}</p>}
      <div className="toolbar" id="project-actions">
        <button type="button" data-action="edit" aria-expanded={edit !== null}
          onClick={() => setEdit(edit === null ? { name: project.name, description: project.description ?? "" } : null)}>Edit</button>
        <button type="button" data-action={project.archived ? "unarchive" : "archive"} className={project.archived ? undefined : "danger"}
          disabled={project.immutable} onClick={() => void archive()}>{project.archived ? "Unarchive" : "Archive"}</button>
        <button type="button" className="danger" data-action="delete" disabled={project.immutable} onClick={() => void remove()}>Delete</button>
      </div>
      {edit && (
        <form className="controls" id="project-edit" aria-label={`Edit project ${project.name}`} onSubmit={(e) => void save(e)}>
          <Field id="project-edit-name" label="Project name">
            <input id="project-edit-name" type="text" required size={20} value={edit.name} onChange={(e) => setEdit({ ...edit, name: e.target.value })} />
          </Field>
          <Field id="project-edit-description" label="Project description">
            <input id="project-edit-description" type="text" size={40} value={edit.description} onChange={(e) => setEdit({ ...edit, description: e.target.value })} />
          </Field>
          <button type="submit" className="primary">Save project</button>
          <button type="button" onClick={() => setEdit(null)}>Cancel</button>
        </form>
      )}
      <p className="error" role="alert" id="project-page-error">{error}</p>
      <ExperimentsPage projectId={id} />
    </>
  );
}
