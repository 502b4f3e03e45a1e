// Breadcrumbs of the organising pages: Workspaces / WORKSPACE / PROJECT / HERE, each a link but
// the last (aria-current="page").
import { Link } from "react-router-dom";

export interface Crumb { to?: string; label: string }

export function Breadcrumbs({ crumbs }: { crumbs: Crumb[] }) {
  return (
    <nav aria-label="Breadcrumbs" className="crumbs" id="breadcrumbs">
      <ol>
        {crumbs.map((c, i) => (
          <li key={`${i}-${c.label}`}>
            {c.to && i < crumbs.length - 1 ? <Link to={c.to}>{c.label}</Link> : <span aria-current="page">{c.label}</span>}
          </li>
        ))}
      </ol>
    </nav>
  );
}

/** The crumbs of an experiment: its workspace and project (when the master names them). */
export function experimentCrumbs(e: { id: number; name: string; workspaceId?: number; workspaceName?: string; projectId?: number; projectName?: string }): Crumb[] {
  const crumbs: Crumb[] = [{ to: "/workspaces", label: "Workspaces" }];
  if (e.workspaceId !== undefined) crumbs.push({ to: `/workspaces/${e.workspaceId}`, label: e.workspaceName ?? `Workspace ${e.workspaceId}` });
  if (e.projectId !== undefined) crumbs.push({ to: `/projects/${e.projectId}`, label: e.projectName ?? `Project ${e.projectId}` });
  crumbs.push({ label: `Experiment ${e.id}: ${e.name}` });
  return crumbs;
}
