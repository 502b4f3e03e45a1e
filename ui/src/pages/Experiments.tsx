// #/experiments: the list, with filters by state, user, label and text kept in the URL hash
// (#/experiments?state=ACTIVE&user=ann&label=nlp&q=bert), and pause/activate/kill per row.
import { useEffect, useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { LabelledSelect, StateCell, Table, useTitle } from "../components/common";
import { fmt, isTerminal, short, when } from "../format";
import type { Experiment } from "../wire";

export const STATES = ["ACTIVE", "PAUSED", "COMPLETED", "CANCELED", "ERROR",
  "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_COMPLETED", "STOPPING_ERROR"];

const NONE = "No experiments yet: create one with `stalwart e create CONFIG DIR`.";

/** Pause, activate and kill buttons for experiment `id`, enabled by its `state`; `after` runs
 * once the master took the action. */
export function ExperimentActions({ id, state, after }: { id: number; state: string; after: () => void }) {
  const { toast, handle } = useShell();
  const act = async (verb: string): Promise<void> => {
    if (verb === "kill" && !window.confirm(`Kill experiment ${id}?`)) return;
    try {
      await api.post(`/experiments/${id}/${verb}`);
      toast(`Experiment ${id}: ${verb} sent`);
      after();
    } catch (err) { handle(err); }
  };
  const s = short(state);
  const terminal = isTerminal(state) || s.startsWith("STOPPING");
  const button = (verb: string, label: string, disabled: boolean, cls?: string) => (
    <button type="button" className={cls} data-action={verb} aria-label={`${label} experiment ${id}`}
      disabled={disabled} onClick={() => void act(verb)}>{label}</button>
  );
  return (
    <div className="actions">
      {button("pause", "Pause", terminal || s === "PAUSED")}
      {button("activate", "Activate", terminal || s !== "PAUSED")}
      {button("kill", "Kill", terminal, "danger")}
    </div>
  );
}

interface Filters { state: string; user: string; label: string; q: string }

const filtersOf = (q: URLSearchParams): Filters => ({
  state: q.get("state") ?? "", user: q.get("user") ?? "", label: q.get("label") ?? "", q: q.get("q") ?? "",
});

export function ExperimentsPage() {
  useTitle("Experiments · Stalwart");
  const [query, setQuery] = useHashQuery((q) => setFilters(filtersOf(q)));
  const [filters, setFilters] = useState<Filters>(() => filtersOf(query));
  const [applied, setApplied] = useState(filters);
  const [users, setUsers] = useState<string[] | null>(null);
  const [data, setData] = useState<{ items: Experiment[]; total: number; filtered: boolean } | null>(null);

  // Filters apply a moment after the last keystroke and live in the hash at once.
  useEffect(() => {
    setQuery({ ...filters });
    const timer = window.setTimeout(() => setApplied(filters), 250);
    return () => window.clearTimeout(timer);
  }, [filters, setQuery]);

  const key = JSON.stringify(applied);
  const refresh = usePoll(async (signal) => {
    const f = applied;
    const qs = new URLSearchParams({ sortBy: "SORT_BY_ID", orderBy: "ORDER_BY_DESC", limit: "200" });
    if (f.state) qs.append("states", `STATE_${f.state}`);
    if (f.user) qs.append("users", f.user);
    if (f.label.trim()) qs.append("labels", f.label.trim());
    if (f.q.trim()) qs.set("name", f.q.trim());
    const [answer, userList] = await Promise.all([
      api.get<{ experiments?: Experiment[]; pagination?: { total?: number } }>(`/experiments?${qs.toString()}`, signal),
      users === null ? api.get<{ users?: { username: string }[] }>("/users", signal).catch(() => null) : null,
    ]);
    if (signal.aborted) return;
    if (userList) setUsers((userList.users ?? []).map((u) => u.username).sort());
    const items = answer.experiments ?? [];
    setData({ items, total: answer.pagination?.total ?? items.length, filtered: Boolean(f.state || f.user || f.label.trim() || f.q.trim()) });
  }, key);

  const set = (patch: Partial<Filters>): void => setFilters((f) => ({ ...f, ...patch }));
  const userOptions: [string, string][] = [["", "Any user"],
    ...(users ?? (filters.user ? [filters.user] : [])).map((n): [string, string] => [n, n])];
  const total = data?.total ?? 0;
  return (
    <>
      <h1 id="experiments-title">Experiments</h1>
      <form className="filters" role="search" aria-label="Filter experiments" onSubmit={(e) => e.preventDefault()}>
        <LabelledSelect id="filter-state" label="State" value={filters.state}
          options={[["", "Any state"], ...STATES.map((s): [string, string] => [s, s])]} onChange={(state) => set({ state })} />
        <LabelledSelect id="filter-user" label="User" value={filters.user} options={userOptions} onChange={(user) => set({ user })} />
        <span className="field">
          <label htmlFor="filter-label">Label</label>
          <input id="filter-label" name="filter-label" type="text" size={12} value={filters.label} onChange={(e) => set({ label: e.target.value })} />
        </span>
        <span className="field">
          <label htmlFor="filter-text">Name contains</label>
          <input id="filter-text" name="filter-text" type="search" size={18} value={filters.q} onChange={(e) => set({ q: e.target.value })} />
        </span>
        <button type="button" id="filter-clear" onClick={() => setFilters({ state: "", user: "", label: "", q: "" })}>Clear filters</button>
      </form>
      <p id="experiments-count" className="muted" aria-live="polite">
        {data ? `${total} experiment${total === 1 ? "" : "s"}${data.filtered ? " match the filters" : ""}` : ""}
      </p>
      <Table id="experiments" labelledBy="experiments-title"
        columns={["ID", "Name", "State", "Progress", "Searcher", "Trials", "Best metric", "User", "Started", "Actions"]}>
        {(data?.items ?? []).map((e) => {
          const p = e.progress ?? (short(e.state) === "COMPLETED" ? 1 : 0);
          return (
            <tr key={e.id} data-key={e.id}>
              <td className="num">{e.id}</td>
              <td><Link to={`/experiments/${e.id}`} title={e.labels?.length ? `Labels: ${e.labels.join(", ")}` : undefined}>{e.name}</Link></td>
              <StateCell state={e.state} />
              <td><progress max={1} value={p} aria-label={`Progress of experiment ${e.id}: ${Math.round(p * 100)}%`} title={`${Math.round(p * 100)}%`} /></td>
              <td>{e.searcherType ?? ""}</td>
              <td className="num">{e.numTrials ?? 0}</td>
              <td className="num">{fmt(e.bestTrialSearcherMetric)}</td>
              <td>{e.displayName || e.username || ""}</td>
              <td>{when(e.startTime)}</td>
              <td><ExperimentActions id={e.id} state={e.state} after={refresh} /></td>
            </tr>
          );
        })}
      </Table>
      {data && data.items.length === 0 && <p className="empty">{data.filtered ? "No experiment matches these filters." : NONE}</p>}
    </>
  );
}
