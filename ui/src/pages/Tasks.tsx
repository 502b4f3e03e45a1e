// #/tasks: commands, notebooks, shells and TensorBoards (GET /commands, /notebooks, /shells,
// /tensorboards), newest first, with a kind filter kept in the hash (#/tasks?kind=notebook) and,
// per row, Open (a notebook's or TensorBoard's serviceAddress under the master), Logs (the
// task's log lines, following: #/tasks?logs=ID) and Kill.
import { useEffect, useRef, useState } from "react";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { LabelledSelect, StateCell, Table, useTitle } from "../components/common";
import { LaunchNotebook } from "../components/LaunchNotebook";
import { TaskLogs } from "../components/Logs";
import { short, when } from "../format";

/** The kinds: path segment (and answer key) -> label. */
export const KINDS: Record<string, string> = { command: "Command", notebook: "Notebook", shell: "Shell", tensorboard: "TensorBoard" };

const EMPTY = "No commands, notebooks, shells or TensorBoards yet: start one with `stw notebook start` or `stw cmd run -- CMD`.";

interface Task { kind: string; id: string; description?: string; username?: string; displayName?: string; state?: string; startTime?: string; exitStatus?: string; serviceAddress?: string }

/** Every task the caller may see, as {kind, ...wire}, newest first. */
export async function allTasks(kinds: string[], signal?: AbortSignal): Promise<Task[]> {
  const answers = await Promise.all(kinds.map((k) => api.get<Record<string, Omit<Task, "kind">[] | undefined>>(`/${k}s`, signal)));
  const items = answers.flatMap((a, i) => (a[`${kinds[i] ?? ""}s`] ?? []).map((t) => ({ ...t, kind: kinds[i] ?? "" })));
  return items.sort((a, b) => String(b.startTime ?? "").localeCompare(String(a.startTime ?? "")) || a.id.localeCompare(b.id));
}

const labelOf = (t: Task): string => `${(KINDS[t.kind] ?? t.kind).toLowerCase()} ${t.id}`;

export function TasksPage() {
  useTitle("Tasks · Stalwart");
  const { toast, handle } = useShell();
  const [query, setQuery] = useHashQuery((q) => setKind(q.get("kind") ?? ""));
  const [kind, setKind] = useState(query.get("kind") ?? "");
  const [logs, setLogs] = useState<Task | null>(null);
  const [items, setItems] = useState<Task[] | null>(null);
  const wantedLogs = useRef(query.get("logs"));
  const logsBox = useRef<HTMLElement>(null);

  useEffect(() => { setQuery({ kind, logs: logs ? logs.id : "" }); }, [kind, logs, setQuery]);
  useEffect(() => { if (logs) logsBox.current?.scrollIntoView({ block: "nearest" }); }, [logs]);

  const refresh = usePoll(async (signal) => {
    const found = await allTasks(kind ? [kind] : Object.keys(KINDS), signal);
    if (signal.aborted) return;
    setItems(found);
    if (wantedLogs.current) {
      const task = found.find((x) => x.id === wantedLogs.current);
      wantedLogs.current = null;
      if (task) setLogs(task);
    }
  }, kind);

  const kill = async (task: Task): Promise<void> => {
    if (!window.confirm(`Kill ${labelOf(task)}?`)) return;
    try {
      await api.post(`/${task.kind}s/${encodeURIComponent(task.id)}/kill`);
      toast(`Kill sent to ${labelOf(task)}`);
      refresh();
    } catch (err) { handle(err); }
  };

  const list = items ?? [];
  return (
    <>
      <h1 id="tasks-title">Tasks</h1>
      <p className="muted">Commands, notebooks, shells and TensorBoards: yours and those of the workspaces you can see.</p>
      <form className="filters" role="search" aria-label="Filter tasks" onSubmit={(e) => e.preventDefault()}>
        <LabelledSelect id="filter-kind" label="Kind" value={kind} onChange={setKind}
          options={[["", "Any kind"], ...Object.entries(KINDS)]} />
      </form>
      <p id="tasks-count" className="muted" aria-live="polite">{items ? `${list.length} task${list.length === 1 ? "" : "s"}` : ""}</p>
      <Table id="tasks" labelledBy="tasks-title" columns={["Kind", "ID", "Description", "Owner", "State", "Started", "Exit status", "Actions"]}>
        {list.map((x) => {
          const ended = short(x.state) === "TERMINATED";
          const address = !ended && x.serviceAddress ? x.serviceAddress : undefined;
          return (
            <tr key={x.id} data-key={x.id}>
              <td>{KINDS[x.kind]}</td><td className="id">{x.id}</td><td>{x.description ?? ""}</td>
              <td>{x.displayName || x.username || ""}</td><StateCell state={x.state} />
              <td>{when(x.startTime)}</td><td>{x.exitStatus ?? ""}</td>
              <td>
                <div className="actions">
                  <a className="button" target="_blank" rel="noopener" data-action="open" aria-label={`Open ${labelOf(x)}`}
                    href={address} hidden={!address}>Open</a>
                  <button type="button" data-action="logs" aria-label={`Logs of ${labelOf(x)}`} onClick={() => setLogs(x)}>Logs</button>
                  <button type="button" className="danger" data-action="kill" aria-label={`Kill ${labelOf(x)}`}
                    disabled={ended || short(x.state) === "TERMINATING"} onClick={() => void kill(x)}>Kill</button>
                </div>
              </td>
            </tr>
          );
        })}
      </Table>
      {items && list.length === 0 && <p className="empty">{kind ? `No ${KINDS[kind] ?? kind} yet.` : EMPTY}</p>}
      <LaunchNotebook onLaunched={() => refresh()} />
      <section id="task-logs-section" aria-labelledby="task-logs-title" hidden={!logs} ref={logsBox}>
        <div className="controls">
          <h2 id="task-logs-title">{logs ? `Logs of ${labelOf(logs)}` : ""}</h2>
          <button type="button" id="task-logs-close" onClick={() => setLogs(null)}>Close logs</button>
        </div>
        {logs && <TaskLogs key={logs.id} taskId={logs.id} label={labelOf(logs)} />}
      </section>
    </>
  );
}
