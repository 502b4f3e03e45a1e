// #/experiments: the list, paged and sorted by the master (`POST /experiments-search`: any
// column, hyperparameters and metric summaries included, NULLs last both ways; `GET
// /experiments` with the same sort and filter, and its ETag, while only fixed columns show), with a column
// picker, filters (state, user, label, name, archived), saved views, selection with bulk
// actions, and pause/activate/kill per row. Everything the user chose lives in the hash's
// query (#/experiments?state=ACTIVE&sort=hp.lr%3Dasc&cols=id,name,hp.lr&size=50&page=2), so a
// reload or a shared link shows the same list.
import { useEffect, useMemo, useRef, useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { BulkActions } from "../components/BulkActions";
import { LabelledSelect, useTitle } from "../components/common";
import { cellText, DEFAULT_COLUMNS, heading, isFixed, isNumeric, pickerSections, type Row } from "../components/listColumns";
import { SavedViews, type View } from "../components/SavedViews";
import { isTerminal, short } from "../format";
import type { ExperimentMore, Project, ProjectColumn, SearchAnswer, Trial } from "../wire";

export const STATES = ["ACTIVE", "PAUSED", "COMPLETED", "CANCELED", "ERROR",
  "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_COMPLETED", "STOPPING_ERROR"];

export const PAGE_SIZES = [10, 25, 50, 100, 200, 500];
const DEFAULT_SIZE = 100;
const DEFAULT_SORT = "id=desc";

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

/** What the list shows, as the hash's query holds it (empty values are dropped there). */
interface ListState {
  state: string; user: string; label: string; q: string; archived: string;
  sort: string; cols: string; size: string; page: string; view: string;
}

const KEYS: (keyof ListState)[] = ["state", "user", "label", "q", "archived", "sort", "cols", "size", "page", "view"];

const stateOf = (q: URLSearchParams | View): ListState => {
  const get = (k: string): string => (q instanceof URLSearchParams ? q.get(k) : q[k]) ?? "";
  return Object.fromEntries(KEYS.map((k) => [k, get(k)])) as unknown as ListState;
};

/** The master's filter JSON for the list's filters (`services/experiment_columns.py`). */
export function filterJson(s: ListState): string {
  const field = (columnName: string, operator: string, value: string) => ({ kind: "field", columnName, operator, value });
  const children = [];
  if (s.state) children.push(field("state", "=", s.state));
  if (s.user) children.push(field("user", "=", s.user));
  if (s.label.trim()) children.push(field("tags", "contains", s.label.trim()));
  if (s.q.trim()) children.push(field("name", "contains", s.q.trim()));
  return JSON.stringify({ filterGroup: { kind: "group", conjunction: "and", children }, showArchived: s.archived === "1" });
}

const sortOf = (s: ListState): [string, boolean] => {
  const [col = "id", dir = "desc"] = (s.sort || DEFAULT_SORT).split(/=(?=[^=]*$)/);
  return [col, dir === "desc"];
};

function ColumnPicker({ offered, shown, onChange }: { offered: ProjectColumn[]; shown: string[]; onChange: (cols: string[]) => void }) {
  const sections = pickerSections(offered);
  const toggle = (name: string, on: boolean): void => {
    onChange(on ? [...shown.filter((c) => c !== name), name] : shown.filter((c) => c !== name));
  };
  return (
    <details className="picker" id="column-picker">
      <summary>Columns ({shown.length})</summary>
      <div className="picker-body">
        {sections.map(([title, names]) => (
          <fieldset key={title}>
            <legend>{title}</legend>
            {names.length === 0 && <p className="muted">None reported yet.</p>}
            {names.map((n) => (
              <label key={n} className="check">
                <input type="checkbox" data-column={n} aria-label={`Column ${n}`} checked={shown.includes(n)} disabled={n === "id" || n === "name"}
                  onChange={(e) => toggle(n, e.target.checked)} />
                {title === "Experiment" ? heading(n) : n}
              </label>
            ))}
          </fieldset>
        ))}
        <button type="button" id="columns-reset" onClick={() => onChange(DEFAULT_COLUMNS)}>Default columns</button>
      </div>
    </details>
  );
}

/** The experiments list; with `projectId` (the project page) only that project's, under an h2. */
export function ExperimentsPage({ projectId }: { projectId?: number } = {}) {
  useTitle("Experiments · Stalwart");  // the project page sets its own after (parent effects run last)
  const { handle } = useShell();
  const [query, setQuery] = useHashQuery((q) => setList(stateOf(q)));
  const [list, setList] = useState<ListState>(() => stateOf(query));
  const [applied, setApplied] = useState(list);
  const [users, setUsers] = useState<string[] | null>(null);
  const [projects, setProjects] = useState<Project[]>([]);
  const [offered, setOffered] = useState<ProjectColumn[]>([]);
  const [data, setData] = useState<{ rows: Row[]; total: number; filtered: boolean } | null>(null);
  const [selected, setSelected] = useState<Map<number, number>>(new Map());
  // First trials of experiments without a best trial (no validation yet): their hyperparameters
  // are what the master sorts `hp.*` by. A first trial's hyperparameters never change.
  const firstTrials = useRef(new Map<number, Trial | null>());

  // Choices apply a moment after the last keystroke and live in the hash at once.
  useEffect(() => {
    setQuery({ ...list });
    const timer = window.setTimeout(() => setApplied(list), 250);
    return () => window.clearTimeout(timer);
  }, [list, setQuery]);

  // Projects (for "Move to") and the columns each offers, merged: read once per visit.
  useEffect(() => {
    const controller = new AbortController();
    (async () => {
      const answer = await api.get<{ projects?: Project[] }>("/workspaces/0/projects", controller.signal);
      const found = answer.projects ?? [];
      setProjects(found);
      const all = await Promise.all(found.map((p) =>
        api.get<{ columns?: ProjectColumn[] }>(`/projects/${p.id}/columns`, controller.signal).catch(() => ({ columns: [] }))));
      const merged = new Map<string, ProjectColumn>();
      for (const a of all) for (const c of a.columns ?? []) merged.set(c.column, c);
      setOffered([...merged.values()]);
    })().catch(handle);
    return () => controller.abort();
  }, [handle]);

  const showsHp = (list.cols || "").split(",").some((c) => c.startsWith("hp."));
  const needsTrials = (list.cols || "").split(",").some((c) => c && !isFixed(c));
  const size = Number(applied.size) || DEFAULT_SIZE;
  const page = Math.max(1, Number(applied.page) || 1);
  const key = JSON.stringify([applied.state, applied.user, applied.label, applied.q, applied.archived, applied.sort, size, page, showsHp, needsTrials, projectId]);
  const refresh = usePoll(async (signal) => {
    const s = applied;
    const sort = s.sort || DEFAULT_SORT;
    const filter = filterJson(s);
    const offset = (page - 1) * size;
    // Without hyperparameter or metric columns the rows need no trial: GET /experiments takes the
    // same sort and filter, and its ETag lets a poll of an unchanged page end in a 304.
    const read = async (): Promise<SearchAnswer> => {
      if (needsTrials) {
        return api.call<SearchAnswer>("POST", "/experiments-search", { sort, filter, offset, limit: size, ...(projectId ? { projectId } : {}) }, "omit", signal);
      }
      const qs = new URLSearchParams({ sort, filter, offset: String(offset), limit: String(size) });
      if (projectId) qs.set("projectId", String(projectId));
      const plain = await api.get<{ experiments?: ExperimentMore[]; pagination?: SearchAnswer["pagination"] }>(
        `/experiments?${qs.toString()}`, signal);
      return { experiments: (plain.experiments ?? []).map((experiment) => ({ experiment })), pagination: plain.pagination };
    };
    const [answer, userList] = await Promise.all([
      read(),
      users === null ? api.get<{ users?: { username: string; displayName?: string }[] }>("/users", signal).catch(() => null) : null,
    ]);
    if (signal.aborted) return;
    if (userList) setUsers((userList.users ?? []).map((u) => u.displayName || u.username).sort());
    const found = answer.experiments ?? [];
    const wanted = showsHp ? found.filter((r) => !r.bestTrial && !firstTrials.current.has(r.experiment.id)) : [];
    await Promise.all(wanted.map(async (r) => {
      const first = await api.get<{ trials?: Trial[] }>(
        `/experiments/${r.experiment.id}/trials?sortBy=SORT_BY_ID&orderBy=ORDER_BY_ASC&limit=1`, signal);
      const trial = first.trials?.[0];
      if (trial) firstTrials.current.set(r.experiment.id, trial);
    }));
    if (signal.aborted) return;
    const rows = found.map((r) => ({ experiment: r.experiment, bestTrial: r.bestTrial,
      firstTrial: firstTrials.current.get(r.experiment.id) ?? null }));
    setData({ rows, total: answer.pagination?.total ?? rows.length,
      filtered: Boolean(s.state || s.user || s.label.trim() || s.q.trim()) });
  }, key);

  const set = (patch: Partial<ListState>): void => setList((l) => ({ ...l, page: "", ...patch }));
  const columns = list.cols ? list.cols.split(",").filter(Boolean) : DEFAULT_COLUMNS;
  const [sortCol, sortDesc] = sortOf(list);
  const sortBy = (col: string): void => {
    const desc = col === sortCol ? !sortDesc : false;
    set({ sort: `${col}=${desc ? "desc" : "asc"}`, view: "" });
  };
  const applyView = (view: View, name: string): void => {
    setList({ ...stateOf(view), page: "", view: name });
  };

  const rows = useMemo(() => data?.rows ?? [], [data]);
  const total = data?.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / size));
  const onPage = rows.map((r) => r.experiment.id);
  const allOnPage = onPage.length > 0 && onPage.every((id) => selected.has(id));
  const someOnPage = onPage.some((id) => selected.has(id));
  const select = (pairs: [number, number][], on: boolean): void => setSelected((old) => {
    const next = new Map(old);
    for (const [id, project] of pairs) { if (on) next.set(id, project); else next.delete(id); }
    return next;
  });
  const afterBulk = (done: number[]): void => {
    select(done.map((id) => [id, 0]), false);
    refresh();
  };
  const userOptions: [string, string][] = [["", "Any user"],
    ...(users ?? (list.user ? [list.user] : [])).map((n): [string, string] => [n, n])];
  const first = total ? (page - 1) * size + 1 : 0;
  // The pager steps from the page asked for last (not yet applied), so quick clicks add up.
  const asked = Math.max(1, Number(list.page) || 1);

  return (
    <>
      {projectId ? <h2 id="experiments-title">Experiments</h2> : <h1 id="experiments-title">Experiments</h1>}
      <form className="filters" role="search" aria-label="Filter experiments" onSubmit={(e) => e.preventDefault()}>
        <LabelledSelect id="filter-state" label="State" value={list.state}
          options={[["", "Any state"], ...STATES.map((s): [string, string] => [s, s])]} onChange={(state) => set({ state })} />
        <LabelledSelect id="filter-user" label="User" value={list.user} options={userOptions} onChange={(user) => set({ user })} />
        <span className="field">
          <label htmlFor="filter-label">Label</label>
          <input id="filter-label" name="filter-label" type="text" size={12} value={list.label} onChange={(e) => set({ label: e.target.value })} />
        </span>
        <span className="field">
          <label htmlFor="filter-text">Name contains</label>
          <input id="filter-text" name="filter-text" type="search" size={18} value={list.q} onChange={(e) => set({ q: e.target.value })} />
        </span>
        <label className="check">
          <input type="checkbox" id="filter-archived" checked={list.archived === "1"}
            onChange={(e) => set({ archived: e.target.checked ? "1" : "" })} />
          Show archived
        </label>
        <button type="button" id="filter-clear" onClick={() => set({ state: "", user: "", label: "", q: "", archived: "" })}>Clear filters</button>
      </form>
      <div className="toolbar">
        <ColumnPicker offered={offered} shown={columns} onChange={(cols) => set({ cols: cols.join(","), view: "" })} />
        <SavedViews current={list as unknown as View} apply={applyView} />
      </div>
      <BulkActions selected={selected} projects={projects} after={afterBulk} />
      <p id="experiments-count" className="muted" aria-live="polite">
        {data ? `${total} experiment${total === 1 ? "" : "s"}${data.filtered ? " match the filters" : ""}` +
          (total ? ` · showing ${first}–${first + rows.length - 1}` : "") : ""}
      </p>
      <div className="scroll">
        <table id="experiments" aria-labelledby="experiments-title">
          <thead>
            <tr>
              <th scope="col" className="select">
                <input type="checkbox" id="select-page" aria-label="Select every experiment on this page" checked={allOnPage}
                  ref={(el) => { if (el) el.indeterminate = someOnPage && !allOnPage; }}
                  onChange={(e) => select(rows.map((r) => [r.experiment.id, r.experiment.projectId ?? 1]), e.target.checked)} />
              </th>
              {columns.map((c) => {
                const sorted = c === sortCol;
                return (
                  <th key={c} scope="col" data-col={c} aria-sort={sorted ? (sortDesc ? "descending" : "ascending") : "none"}>
                    <button type="button" className="sort" onClick={() => sortBy(c)}
                      aria-label={`Sort by ${heading(c)}${sorted && !sortDesc ? ", descending" : ""}`}>
                      {heading(c)}
                    </button>
                  </th>
                );
              })}
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => {
              const e = row.experiment;
              return (
                <tr key={e.id} data-key={e.id} aria-selected={selected.has(e.id)}>
                  <td className="select">
                    <input type="checkbox" aria-label={`Select experiment ${e.id}`} checked={selected.has(e.id)}
                      onChange={(ev) => select([[e.id, e.projectId ?? 1]], ev.target.checked)} />
                  </td>
                  {columns.map((c) => {
                    if (c === "name") {
                      return <td key={c} data-col={c}><Link to={`/experiments/${e.id}`}
                        title={e.labels?.length ? `Labels: ${e.labels.join(", ")}` : undefined}>{e.name}</Link></td>;
                    }
                    if (c === "state") return <td key={c} data-col={c} className={`state state-${short(e.state)}`}>{short(e.state)}</td>;
                    if (c === "progress") {
                      const p = e.progress ?? (short(e.state) === "COMPLETED" ? 1 : 0);
                      return <td key={c} data-col={c}><progress max={1} value={p} title={`${Math.round(p * 100)}%`}
                        aria-label={`Progress of experiment ${e.id}: ${Math.round(p * 100)}%`} /></td>;
                    }
                    return <td key={c} data-col={c} className={isNumeric(c) ? "num" : undefined}>{cellText(row, c)}</td>;
                  })}
                  <td><ExperimentActions id={e.id} state={e.state} after={refresh} /></td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      {data && rows.length === 0 && <p className="empty">{data.filtered ? "No experiment matches these filters." : NONE}</p>}
      <nav className="pager" aria-label="Pages of experiments">
        <button type="button" id="page-prev" disabled={asked <= 1} onClick={() => set({ page: String(asked - 1) })}>Previous</button>
        <span id="page-of">Page {page} of {pages}</span>
        <button type="button" id="page-next" disabled={asked >= pages} onClick={() => set({ page: String(asked + 1) })}>Next</button>
        <LabelledSelect id="page-size" label="Per page" value={String(size)}
          options={PAGE_SIZES.map((n): [string, string] => [String(n), String(n)])}
          onChange={(v) => set({ size: v === String(DEFAULT_SIZE) ? "" : v })} />
      </nav>
    </>
  );
}
