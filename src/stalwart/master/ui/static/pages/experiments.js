// #/experiments: the list, with filters by state, user, label and text kept in the URL hash
// (#/experiments?state=ACTIVE&user=ann&label=nlp&q=bert), and pause/activate/kill per row.
import * as api from "../api.js";
import { fmt } from "../chart.js";
import {
  h, handle, hashQuery, labelledSelect, main, poll, setHashQuery, setOptions, setText, short,
  stateCell, syncRows, table, toast, when,
} from "../dom.js";

export const STATES = ["ACTIVE", "PAUSED", "COMPLETED", "CANCELED", "ERROR",
  "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_COMPLETED", "STOPPING_ERROR"];

/** Pause, activate and kill buttons for experiment `id`; `update(state)` enables them. */
export function experimentActions(id, after) {
  const act = async (verb) => {
    if (verb === "kill" && !window.confirm(`Kill experiment ${id}?`)) return;
    try {
      await api.post(`/experiments/${id}/${verb}`);
      toast(`Experiment ${id}: ${verb} sent`);
      await after();
    } catch (err) { handle(err); }
  };
  const make = (verb, label, cls) => h("button", {
    type: "button", class: cls, "data-action": verb,
    "aria-label": `${label} experiment ${id}`, onclick: () => act(verb),
  }, label);
  const pause = make("pause", "Pause");
  const activate = make("activate", "Activate");
  const kill = make("kill", "Kill", "danger");
  const box = h("div", { class: "actions" }, pause, activate, kill);
  const update = (state) => {
    const s = short(state);
    const terminal = ["COMPLETED", "CANCELED", "ERROR", "DELETED"].includes(s) || s.startsWith("STOPPING");
    pause.disabled = terminal || s === "PAUSED";
    activate.disabled = terminal || s !== "PAUSED";
    kill.disabled = terminal;
  };
  return { box, update };
}

export function experimentsPage() {
  document.title = "Experiments · Stalwart";
  const query = hashQuery();
  const state = labelledSelect("filter-state", "State",
    [["", "Any state"], ...STATES.map((s) => [s, s])], query.get("state") || "");
  const user = labelledSelect("filter-user", "User", [["", "Any user"]], query.get("user") || "");
  if (query.get("user")) setOptions(user.select, [["", "Any user"], [query.get("user"), query.get("user")]], query.get("user"));
  const label = h("input", { id: "filter-label", name: "filter-label", type: "text", value: query.get("label") || "", size: 12 });
  const text = h("input", { id: "filter-text", name: "filter-text", type: "search", value: query.get("q") || "", size: 18 });
  const clear = h("button", { type: "button", id: "filter-clear" }, "Clear filters");
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter experiments" },
    state.box, user.box,
    h("span", { class: "field" }, h("label", { for: "filter-label" }, "Label"), label),
    h("span", { class: "field" }, h("label", { for: "filter-text" }, "Name contains"), text),
    clear);
  filters.addEventListener("submit", (e) => e.preventDefault());
  const { table: t, tbody } = table("experiments", "experiments-title", ["ID", "Name", "State", "Progress",
    "Searcher", "Trials", "Best metric", "User", "Started", "Actions"]);
  const count = h("p", { id: "experiments-count", class: "muted", "aria-live": "polite" });
  const empty = h("p", { class: "empty", hidden: true }, "No experiments yet: create one with `stalwart e create CONFIG DIR`.");
  main.replaceChildren(h("h1", { id: "experiments-title" }, "Experiments"), filters, count,
    h("div", { class: "scroll" }, t), empty);

  let usersLoaded = false;
  const params = () => ({
    state: state.select.value, user: user.select.value, label: label.value.trim(), q: text.value.trim(),
  });
  const refresh = async () => {
    const f = params();
    const qs = new URLSearchParams({ sortBy: "SORT_BY_ID", orderBy: "ORDER_BY_DESC", limit: "200" });
    if (f.state) qs.append("states", `STATE_${f.state}`);
    if (f.user) qs.append("users", f.user);
    if (f.label) qs.append("labels", f.label);
    if (f.q) qs.set("name", f.q);
    const [data, users] = await Promise.all([
      api.get(`/experiments?${qs}`),
      usersLoaded ? null : api.get("/users").catch(() => null),
    ]);
    if (users) {
      usersLoaded = true;
      const names = (users.users || []).map((u) => u.username).sort();
      setOptions(user.select, [["", "Any user"], ...names.map((n) => [n, n])], f.user);
    }
    const same = JSON.stringify(f) === JSON.stringify(params());
    if (!same) return;  // the filters changed while this answer was on its way
    const items = data.experiments || [];
    const filtered = Boolean(f.state || f.user || f.label || f.q);
    empty.hidden = items.length > 0;
    setText(empty, filtered ? "No experiment matches these filters." : "No experiments yet: create one with `stalwart e create CONFIG DIR`.");
    const total = data.pagination?.total ?? items.length;
    setText(count, `${total} experiment${total === 1 ? "" : "s"}${filtered ? " match the filters" : ""}`);
    syncRows(tbody, items, (e) => e.id, (e) => {
      const actions = experimentActions(e.id, refresh);
      const row = h("tr", {},
        h("td", { class: "num" }, String(e.id)),
        h("td", {}, h("a", { href: `#/experiments/${e.id}` })),
        h("td", {}), h("td", {}, h("progress", { max: 1 })), h("td", {}), h("td", { class: "num" }),
        h("td", { class: "num" }), h("td", {}), h("td", {}), h("td", {}, actions.box));
      row.actions = actions;
      return row;
    }, (row, e) => {
      const c = row.cells;
      setText(c[1].firstChild, e.name);
      if ((e.labels || []).length) c[1].firstChild.title = `Labels: ${e.labels.join(", ")}`;
      stateCell(c[2], e.state);
      const bar = c[3].firstChild;
      const p = e.progress ?? (short(e.state) === "COMPLETED" ? 1 : 0);
      bar.value = p;
      bar.setAttribute("aria-label", `Progress of experiment ${e.id}: ${Math.round(p * 100)}%`);
      bar.title = `${Math.round(p * 100)}%`;
      setText(c[4], e.searcherType || "");
      setText(c[5], String(e.numTrials ?? 0));
      setText(c[6], fmt(e.bestTrialSearcherMetric));
      setText(c[7], e.displayName || e.username || "");
      setText(c[8], when(e.startTime));
      row.actions.update(e.state);
    });
  };
  let debounce = null;
  const changed = () => {
    setHashQuery(params());
    clearTimeout(debounce);
    debounce = setTimeout(() => refresh().catch(handle), 250);
  };
  for (const control of [state.select, user.select]) control.addEventListener("change", changed);
  for (const control of [label, text]) control.addEventListener("input", changed);
  clear.addEventListener("click", () => {
    state.select.value = ""; user.select.value = ""; label.value = ""; text.value = "";
    changed();
  });
  poll(refresh);
}
