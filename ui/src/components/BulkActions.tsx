// Actions on the selected experiments at once, through the master's bulk endpoints:
// `POST /projects/-1/experiments/{archive,unarchive,pause,activate,cancel,kill}` and
// `DELETE /projects/-1/experiments/delete` (project -1: wherever they are), and
// `POST /projects/{from}/experiments/move` once per source project. Each answers one result per
// experiment; the refused ones are listed with the master's reason (#bulk-results).
import { useState } from "react";
import { useNavigate } from "react-router-dom";
import * as api from "../api";
import { useShell } from "../app";
import type { BulkResult, Project } from "../wire";

interface Props {
  /** The selected experiments: id -> project id. */
  selected: Map<number, number>;
  projects: Project[];
  /** Runs after an action: refresh the list, clear the selection of what is gone. */
  after: (done: number[]) => void;
}

const VERBS: [string, string, string | null][] = [
  ["archive", "Archive", null], ["unarchive", "Unarchive", null], ["pause", "Pause", null],
  ["activate", "Activate", null], ["cancel", "Cancel", "Cancel"], ["kill", "Kill", "Kill"],
  ["delete", "Delete", "Delete"],
];

export function BulkActions({ selected, projects, after }: Props) {
  const { toast, handle } = useShell();
  const navigate = useNavigate();
  const [target, setTarget] = useState("");
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState<{ verb: string; results: BulkResult[] } | null>(null);
  const ids = [...selected.keys()].sort((a, b) => a - b);
  const n = ids.length;

  const report = (verb: string, results: BulkResult[]): void => {
    const bad = results.filter((r) => r.error);
    setRefused(bad.length ? { verb, results: bad } : null);
    toast(`${verb}: ${results.length - bad.length} done${bad.length ? `, ${bad.length} refused` : ""}`);
    after(results.filter((r) => !r.error).map((r) => r.id));
  };
  const run = async (verb: string, what: () => Promise<BulkResult[]>): Promise<void> => {
    setBusy(true);
    try { report(verb, await what()); } catch (err) { handle(err); } finally { setBusy(false); }
  };
  const act = (verb: string, confirmWord: string | null): void => {
    if (confirmWord && !window.confirm(`${confirmWord} ${n} experiment${n === 1 ? "" : "s"} (${ids.join(", ")})?`)) return;
    const body = { experimentIds: ids, projectId: -1 };
    void run(verb, async () => {
      const answer = verb === "delete"
        ? await api.call<{ results?: BulkResult[] }>("DELETE", "/projects/-1/experiments/delete", body)
        : await api.post<{ results?: BulkResult[] }>(`/projects/-1/experiments/${verb}`, body);
      return answer.results ?? [];
    });
  };
  const move = (): void => {
    const destination = Number(target);
    if (!destination) return;
    const bySource = new Map<number, number[]>();
    for (const [id, project] of selected) bySource.set(project, [...(bySource.get(project) ?? []), id]);
    void run("move", async () => {
      const all: BulkResult[] = [];
      for (const [source, experimentIds] of bySource) {
        const answer = await api.post<{ results?: BulkResult[] }>(`/projects/${source}/experiments/move`,
          { destinationProjectId: destination, experimentIds, projectId: source });
        all.push(...(answer.results ?? []));
      }
      return all;
    });
  };
  return (
    <section className="bulk" aria-label="Selected experiments">
      <span id="selected-count" aria-live="polite">{n} selected</span>
      {VERBS.map(([verb, label, confirmWord]) => (
        <button key={verb} type="button" data-bulk={verb} disabled={!n || busy}
          className={confirmWord ? "danger" : undefined} onClick={() => act(verb, confirmWord)}>{label}</button>
      ))}
      <span className="field">
        <label htmlFor="move-target">Move to</label>
        <select id="move-target" value={target} onChange={(e) => setTarget(e.target.value)}>
          <option value="">(project)</option>
          {projects.map((p) => <option key={p.id} value={String(p.id)}>{p.workspaceName ? `${p.workspaceName} / ${p.name}` : p.name}</option>)}
        </select>
      </span>
      <button type="button" data-bulk="move" disabled={!n || !target || busy} onClick={move}>Move</button>
      <button type="button" data-bulk="compare" disabled={!n} onClick={() => navigate(`/compare?experiments=${ids.join(",")}`)}>Compare</button>
      {refused && (
        <div id="bulk-results" role="alert">
          <p>{refused.verb}: the master refused {refused.results.length}:</p>
          <ul>{refused.results.map((r) => <li key={r.id} data-id={r.id}>Experiment {r.id}: {r.error}</li>)}</ul>
          <button type="button" onClick={() => setRefused(null)}>Dismiss</button>
        </div>
      )}
    </section>
  );
}
