// The experiment page's Trials tab: every trial in a table sorted by any column (id, state,
// each hyperparameter, batches, latest and best searcher metric, restarts; click a header
// again to reverse) and narrowed by a text filter (id, state or any hyperparameter value).
// Sort and filter are kept in the hash's query (`?sort=hp.lr&order=desc&filter=adam`), beside
// the overview's choices.
import { useMemo, useState } from "react";
import { Link } from "react-router-dom";
import { useHashQuery } from "../../app";
import { StateCell } from "../../components/common";
import { fmt, hpText, short } from "../../format";
import type { Trial } from "../../wire";

type Value = number | string | null;

interface Column { key: string; label: string; value: (t: Trial) => Value }

/** Compare two cell values: numbers before text, missing values last whatever the order. */
export function compareValues(a: Value, b: Value, desc: boolean): number {
  if (a === null || b === null) return a === b ? 0 : (a === null ? 1 : -1);
  const order = typeof a === "number" && typeof b === "number" ? a - b
    : typeof a === "number" ? -1 : typeof b === "number" ? 1 : a.localeCompare(b, undefined, { numeric: true });
  return desc ? -order : order;
}

function numberOr(v: unknown): Value {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (v === undefined || v === null) return null;
  return hpText(v);
}

export function TrialsTab({ trials, searcherMetric }: { trials: Trial[]; searcherMetric: string }) {
  const [query, setQuery] = useHashQuery((q) => {
    setSortKey(q.get("sort") || "id");
    setDesc(q.get("order") === "desc");
    setFilter(q.get("filter") ?? "");
  });
  const [sortKey, setSortKey] = useState(query.get("sort") || "id");
  const [desc, setDesc] = useState(query.get("order") === "desc");
  const [filter, setFilter] = useState(query.get("filter") ?? "");
  /** Write the table's choices into the query, keeping every other key (the overview's). */
  const keep = (patch: { sort?: string; order?: string; filter?: string }): void => {
    const next: Record<string, string> = Object.fromEntries(query.entries());
    Object.assign(next, { sort: sortKey === "id" ? "" : sortKey, order: desc ? "desc" : "", filter }, patch);
    setQuery(next);
  };
  const hpKeys = useMemo(() => [...new Set(trials.flatMap((t) => Object.keys(t.hparams ?? {})))].sort(), [trials]);
  const columns = useMemo<Column[]>(() => [
    { key: "id", label: "Trial", value: (t) => t.id },
    { key: "state", label: "State", value: (t) => short(t.state) },
    ...hpKeys.map((k): Column => ({ key: `hp.${k}`, label: k, value: (t) => numberOr(t.hparams?.[k]) })),
    { key: "batches", label: "Batches", value: (t) => t.totalBatchesProcessed ?? 0 },
    { key: "latest", label: `Latest ${searcherMetric}`, value: (t) => numberOr(t.latestValidation?.metrics?.avgMetrics?.[searcherMetric]) },
    { key: "best", label: `Best ${searcherMetric}`, value: (t) => numberOr(t.searcherMetricValue) },
    { key: "restarts", label: "Restarts", value: (t) => t.restarts ?? 0 },
  ], [hpKeys, searcherMetric]);
  const sortValue = (columns.find((c) => c.key === sortKey) ?? { value: (t: Trial): Value => t.id }).value;
  const needle = filter.trim().toLowerCase();
  const shown = useMemo(() => {
    const kept = needle ? trials.filter((t) => [String(t.id), short(t.state), ...hpKeys.map((k) => hpText(t.hparams?.[k]))]
      .some((text) => text.toLowerCase().includes(needle))) : trials.slice();
    return kept.sort((a, b) => compareValues(sortValue(a), sortValue(b), desc) || a.id - b.id);
  }, [trials, needle, hpKeys, sortValue, desc]);

  const sort = (key: string): void => {
    const reverse = key === sortKey ? !desc : false;
    setSortKey(key);
    setDesc(reverse);
    keep({ sort: key === "id" ? "" : key, order: reverse ? "desc" : "" });
  };
  const cell = (c: Column, t: Trial): React.ReactNode => {
    if (c.key === "id") return <td key={c.key}><Link to={`/trials/${t.id}`} aria-label={`Trial ${t.id}`}>{t.id}</Link></td>;
    if (c.key === "state") return <StateCell key={c.key} state={t.state} />;
    const v = c.value(t);
    return <td key={c.key} className={typeof v === "number" ? "num" : undefined}>{typeof v === "number" ? (Number.isInteger(v) ? String(v) : fmt(v)) : (v ?? "–")}</td>;
  };

  return (
    <>
      <h2 id="trials-title">Trials</h2>
      <div className="controls">
        <span className="field">
          <label htmlFor="trials-filter">Filter trials</label>
          <input type="search" id="trials-filter" value={filter} placeholder="id, state or hyperparameter"
            onChange={(e) => { setFilter(e.target.value); keep({ filter: e.target.value }); }} />
        </span>
        <span className="muted" id="trials-count" aria-live="polite">{shown.length} of {trials.length} trials</span>
      </div>
      <div className="scroll">
        <table id="trials" aria-labelledby="trials-title">
          <thead>
            <tr>
              {columns.map((c) => (
                <th key={c.key} scope="col" data-column={c.key}
                  aria-sort={c.key === sortKey ? (desc ? "descending" : "ascending") : "none"}>
                  <button type="button" className="sort" onClick={() => sort(c.key)}>
                    {c.label}
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.map((t) => <tr key={t.id} data-key={t.id}>{columns.map((c) => cell(c, t))}</tr>)}
          </tbody>
        </table>
      </div>
      {shown.length === 0 && <p className="empty">{trials.length ? "No trial matches the filter." : "No trials yet."}</p>}
    </>
  );
}
