// #/tasks: commands, notebooks, shells and TensorBoards (GET /commands, /notebooks, /shells,
// /tensorboards), newest first, with a kind filter kept in the hash (#/tasks?kind=notebook) and,
// per row, Open (a notebook's or TensorBoard's serviceAddress under the master), Logs (the
// task's log lines, following: #/tasks?logs=ID) and Kill.
import * as api from "../api.js";
import {
  h, handle, hashQuery, labelledSelect, main, onLeave, poll, setHashQuery, setText, short,
  stateCell, syncRows, table, toast, when,
} from "../dom.js";
import { taskLogsPanel } from "../logs.js";

/** The kinds: path segment (and answer key) -> label. */
export const KINDS = { command: "Command", notebook: "Notebook", shell: "Shell", tensorboard: "TensorBoard" };

const EMPTY = "No commands, notebooks, shells or TensorBoards yet: start one with `stw notebook start` or `stw cmd run -- CMD`.";

/** Every task the caller may see, as {kind, ...wire}, newest first. */
export async function allTasks(kinds) {
  const answers = await Promise.all(kinds.map((k) => api.get(`/${k}s`)));
  const items = answers.flatMap((a, i) => (a[`${kinds[i]}s`] || []).map((t) => ({ kind: kinds[i], ...t })));
  return items.sort((a, b) => String(b.startTime || "").localeCompare(String(a.startTime || ""))
    || a.id.localeCompare(b.id));
}

const label = (t) => `${KINDS[t.kind].toLowerCase()} ${t.id}`;

export function tasksPage() {
  document.title = "Tasks · Stalwart";
  const query = hashQuery();
  const kind = labelledSelect("filter-kind", "Kind",
    [["", "Any kind"], ...Object.entries(KINDS)], query.get("kind") || "");
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter tasks" }, kind.box);
  filters.addEventListener("submit", (e) => e.preventDefault());
  const { table: t, tbody } = table("tasks", "tasks-title",
    ["Kind", "ID", "Description", "Owner", "State", "Started", "Exit status", "Actions"]);
  const count = h("p", { id: "tasks-count", class: "muted", "aria-live": "polite" });
  const empty = h("p", { class: "empty", hidden: true }, EMPTY);
  const logsTitle = h("h2", { id: "task-logs-title" });
  const closeLogs = h("button", { type: "button", id: "task-logs-close" }, "Close logs");
  const logsBox = h("section", { id: "task-logs-section", "aria-labelledby": "task-logs-title", hidden: true },
    h("div", { class: "controls" }, logsTitle, closeLogs));
  main.replaceChildren(h("h1", { id: "tasks-title" }, "Tasks"),
    h("p", { class: "muted" }, "Commands, notebooks, shells and TensorBoards: yours and those of the workspaces you can see."),
    filters, count, h("div", { class: "scroll" }, t), empty, logsBox);

  let shown = null;  // {id, panel}
  const showLogs = (task) => {
    if (shown) { shown.panel.stop(); shown.panel.box.remove(); shown = null; }
    setHashQuery({ kind: kind.select.value, logs: task ? task.id : "" });
    logsBox.hidden = !task;
    if (!task) return;
    setText(logsTitle, `Logs of ${label(task)}`);
    const panel = taskLogsPanel(task.id, label(task));
    logsBox.append(panel.box);
    shown = { id: task.id, panel };
    panel.start();
    logsBox.scrollIntoView({ block: "nearest" });
  };
  closeLogs.addEventListener("click", () => showLogs(null));
  onLeave(() => { shown = null; });

  const kill = async (task) => {
    if (!window.confirm(`Kill ${label(task)}?`)) return;
    try {
      await api.post(`/${task.kind}s/${encodeURIComponent(task.id)}/kill`);
      toast(`Kill sent to ${label(task)}`);
      await refresh();
    } catch (err) { handle(err); }
  };

  let wantedLogs = query.get("logs");
  const refresh = async () => {
    const f = kind.select.value;
    const items = await allTasks(f ? [f] : Object.keys(KINDS));
    if (f !== kind.select.value) return;  // the filter changed while this answer was on its way
    empty.hidden = items.length > 0;
    setText(empty, f ? `No ${KINDS[f]} yet.` : EMPTY);
    setText(count, `${items.length} task${items.length === 1 ? "" : "s"}`);
    syncRows(tbody, items, (x) => x.id, (x) => {
      const open = h("a", { class: "button", target: "_blank", rel: "noopener", "data-action": "open",
        "aria-label": `Open ${label(x)}` }, "Open");
      const logs = h("button", { type: "button", "data-action": "logs", "aria-label": `Logs of ${label(x)}`,
        onclick: () => showLogs(x) }, "Logs");
      const stop = h("button", { type: "button", class: "danger", "data-action": "kill",
        "aria-label": `Kill ${label(x)}`, onclick: () => kill(x) }, "Kill");
      const row = h("tr", {}, h("td", {}), h("td", { class: "id" }), h("td", {}), h("td", {}), h("td", {}),
        h("td", {}), h("td", {}), h("td", {}, h("div", { class: "actions" }, open, logs, stop)));
      row.controls = { open, stop };
      return row;
    }, (row, x) => {
      const c = row.cells;
      setText(c[0], KINDS[x.kind]);
      setText(c[1], x.id);
      setText(c[2], x.description || "");
      setText(c[3], x.displayName || x.username || "");
      stateCell(c[4], x.state);
      setText(c[5], when(x.startTime));
      setText(c[6], x.exitStatus || "");
      const ended = short(x.state) === "TERMINATED";
      const { open, stop } = row.controls;
      const address = !ended && x.serviceAddress ? x.serviceAddress : null;
      open.hidden = !address;
      if (address && open.getAttribute("href") !== address) open.setAttribute("href", address);
      stop.disabled = ended || short(x.state) === "TERMINATING";
    });
    if (wantedLogs) {
      const task = items.find((x) => x.id === wantedLogs);
      wantedLogs = null;
      if (task) showLogs(task);
    }
  };
  kind.select.addEventListener("change", () => {
    setHashQuery({ kind: kind.select.value, logs: shown ? shown.id : "" });
    refresh().catch(handle);
  });
  poll(refresh);
}
