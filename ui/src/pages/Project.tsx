// #/projects/ID: one project (GET /projects/ID; "not found" when it does not exist or the caller
// has no role in its workspace), under breadcrumbs (Workspaces / WORKSPACE / PROJECT), with its
// description and its experiments: the experiments list narrowed to the project (projectId).
import { useState } from "react";
import { Link, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll } from "../app";
import { Breadcrumbs } from "../components/Breadcrumbs";
import { useTitle } from "../components/common";
import { ExperimentsPage } from "./Experiments";
import type { Project } from "./Workspace";

export function ProjectPage() {
  const id = Number(useParams().id);
  const [project, setProject] = useState<Project | null | "missing">(null);
  useTitle(`${project && project !== "missing" ? project.name : `Project ${id}`} · Stalwart`);

  usePoll(async (signal) => {
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
  return (
    <>
      <Breadcrumbs crumbs={[
        { to: "/workspaces", label: "Workspaces" },
        { to: `/workspaces/${project.workspaceId}`, label: project.workspaceName ?? `Workspace ${project.workspaceId}` },
        { label: project.name },
      ]} />
      <h1 id="project-title">Project {project.name}{project.archived ? " (archived)" : ""}</h1>
      {project.description && <p id="project-description">{project.description}</p>}
      <ExperimentsPage projectId={id} />
    </>
  );
}
