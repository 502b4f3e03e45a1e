// #/workspaces: the workspaces the caller may see (GET /workspaces; archived ones only with
// "Show archived", kept in the hash: #/workspaces?archived=1), pinned first, with a form that
// creates one (POST /workspaces: its creator becomes its admin and has it pinned) and, per row,
// Pin/Unpin (POST /workspaces/ID/pin|unpin) and Archive/Unarchive (POST
// /workspaces/ID/archive|unarchive, archiving after confirm). The built-in Uncategorized
// workspace cannot be archived (the master says so).
import { useEffect, useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { Table, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";

export interface Workspace {
  id: number; name: string; archived?: boolean; pinned?: boolean; immutable?: boolean;
  username?: string; numProjects?: number; numExperiments?: number;
}

const EMPTY = "No workspaces you can see: create one below or with `det workspace create NAME`.";

/** Every workspace the caller may see (archived ones too when `archived`), pinned first. */
export async function workspaces(archived: boolean, signal?: AbortSignal): Promise<Workspace[]> {
  const answer = await api.get<{ workspaces?: Workspace[] }>(`/workspaces${archived ? "" : "?archived=false"}`, signal);
  return (answer.workspaces ?? []).slice().sort((a, b) => Number(Boolean(b.pinned)) - Number(Boolean(a.pinned)) || a.id - b.id);
}

export function WorkspacesPage() {
  useTitle("Workspaces · Stalwart");
  const { toast, handle } = useShell();
  // The choice is the page's state (a controlled checkbox follows a click at once), written to
  // the hash and read back from it when the address changes by other means.
  const [query, setQuery] = useHashQuery((q) => setShowArchived(q.get("archived") === "1"));
  const [showArchived, setShowArchived] = useState(query.get("archived") === "1");
  useEffect(() => { setQuery(showArchived ? { archived: "1" } : {}); }, [showArchived, setQuery]);
  const [items, setItems] = useState<Workspace[] | null>(null);
  const [name, setName] = useState("");
  const [error, setError] = useState("");

  const refresh = usePoll(async (signal) => {
    const found = await workspaces(showArchived, signal);
    if (!signal.aborted) setItems(found);
  }, `workspaces-${showArchived}`);

  const act = async (w: Workspace, verb: "pin" | "unpin" | "archive" | "unarchive"): Promise<void> => {
    if (verb === "archive" && !window.confirm(`Archive workspace ${w.name}? It takes no new projects or tasks until unarchived.`)) return;
    setError("");
    try {
      await api.post(`/workspaces/${w.id}/${verb}`);
      toast(`Workspace ${w.name}: ${verb === "pin" ? "pinned" : verb === "unpin" ? "unpinned" : `${verb}d`}`);
      refresh();
    } catch (err) {
      const message = refusal(err, `${verb} workspace ${w.name}`);
      if (message) setError(message); else handle(err);
    }
  };
  const create = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    try {
      const answer = await api.post<{ workspace: Workspace }>("/workspaces", { name: name.trim() });
      toast(`Created workspace ${answer.workspace.name}`);
      setName("");
      refresh();
    } catch (err) {
      const message = refusal(err, "create the workspace");
      if (message) setError(message); else handle(err);
    }
  };

  const list = items ?? [];
  return (
    <>
      <h1 id="workspaces-title">Workspaces</h1>
      <form className="filters" aria-label="Workspace filters" onSubmit={(e) => e.preventDefault()}>
        <label className="field"><input type="checkbox" id="show-archived" checked={showArchived}
          onChange={(e) => setShowArchived(e.target.checked)} />Show archived</label>
      </form>
      <p id="workspaces-count" className="muted" aria-live="polite">{items ? `${list.length} workspace${list.length === 1 ? "" : "s"}` : ""}</p>
      <Table id="workspaces" labelledBy="workspaces-title" columns={["ID", "Name", "Projects", "Experiments", "Owner", "State", "Actions"]}>
        {list.map((w) => (
          <tr key={w.id} data-key={w.id} data-pinned={w.pinned ? "true" : "false"}>
            <td className="num">{w.id}</td>
            <td><Link to={`/workspaces/${w.id}`}>{w.name}</Link>{w.pinned ? <span className="muted"> (pinned)</span> : null}</td>
            <td className="num">{w.numProjects ?? 0}</td>
            <td className="num">{w.numExperiments ?? 0}</td>
            <td>{w.username ?? ""}</td>
            <td>{w.archived ? "archived" : "active"}</td>
            <td>
              <div className="actions">
                {w.pinned
                  ? <button type="button" data-action="unpin" aria-label={`Unpin workspace ${w.name}`} onClick={() => void act(w, "unpin")}>Unpin</button>
                  : <button type="button" data-action="pin" aria-label={`Pin workspace ${w.name}`} onClick={() => void act(w, "pin")}>Pin</button>}
                {w.archived
                  ? <button type="button" data-action="unarchive" aria-label={`Unarchive workspace ${w.name}`} onClick={() => void act(w, "unarchive")}>Unarchive</button>
                  : <button type="button" className="danger" data-action="archive" aria-label={`Archive workspace ${w.name}`} disabled={w.immutable} onClick={() => void act(w, "archive")}>Archive</button>}
              </div>
            </td>
          </tr>
        ))}
      </Table>
      {items && list.length === 0 && <p className="empty">{EMPTY}</p>}
      <h2 id="workspace-new-title">New workspace</h2>
      <form className="controls" id="workspace-form" aria-labelledby="workspace-new-title" onSubmit={(e) => void create(e)}>
        <Field id="workspace-name" label="Name">
          <input id="workspace-name" name="name" type="text" required size={24} value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <button type="submit" className="primary">Create workspace</button>
      </form>
      <p className="error" role="alert" id="workspace-error">{error}</p>
    </>
  );
}
