// #/compare?experiments=1,2 or #/compare?trials=4,7,9: trials side by side. One chart per
// metric with a line per trial (each trial's colour is the one every chart gives it), and a
// table with a column per trial: experiment, state, hyperparameters, searcher metric and the
// latest validation metrics, rows whose values differ highlighted. Experiments compare all
// their trials (at most MAX_TRIALS). Reads `/experiments/{id}`, `/experiments/{id}/trials`,
// `/trials/{id}` and `/ui/trials/{id}/series` (training and validation); polls only while a
// trial can still change.
import { useMemo, useState } from "react";
import { Link, useSearchParams } from "react-router-dom";
import * as api from "../api";
import { usePoll } from "../app";
import { trialColor } from "../colors";
import { useTitle } from "../components/common";
import { LineChart, type Line } from "../components/LineChart";
import { fmt, hpText, isTerminal, short } from "../format";
import type { Experiment, Trial, TrialSeriesAnswer } from "../wire";

export const MAX_TRIALS = 50;
const GROUPS = ["validation", "training"];

const ids = (text: string | null): number[] =>
  [...new Set((text ?? "").split(",").map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0))];

interface Loaded {
  trials: Trial[];
  experiments: Map<number, Experiment>;
  series: Map<number, TrialSeriesAnswer[]>;
  missing: string[];
}

/** The values of one row of the table, per trial (text). */
interface TableRow { key: string; label: string; values: string[]; differs: boolean }

function tableOf(loaded: Loaded): TableRow[] {
  const { trials, experiments } = loaded;
  const rows: TableRow[] = [];
  const add = (key: string, label: string, values: string[]): void => {
    rows.push({ key, label, values, differs: new Set(values).size > 1 });
  };
  add("experiment", "Experiment", trials.map((t) => {
    const e = experiments.get(t.experimentId);
    return e ? `${e.name} (${e.id})` : String(t.experimentId);
  }));
  add("state", "State", trials.map((t) => short(t.state)));
  add("batches", "Batches", trials.map((t) => String(t.totalBatchesProcessed ?? 0)));
  const hps = new Set<string>();
  for (const t of trials) for (const k of Object.keys(t.hparams ?? {})) hps.add(k);
  for (const k of [...hps].sort()) add(`hp.${k}`, k, trials.map((t) => (t.hparams && k in t.hparams ? hpText(t.hparams[k]) : "–")));
  const metricNames = new Set<string>();
  for (const t of trials) for (const k of Object.keys(t.latestValidation?.metrics?.avgMetrics ?? {})) metricNames.add(k);
  add("searcher", "Searcher metric (best)", trials.map((t) => fmt(t.searcherMetricValue)));
  for (const k of [...metricNames].sort()) {
    add(`latest.${k}`, `${k} (latest validation)`, trials.map((t) => {
      const v = t.latestValidation?.metrics?.avgMetrics?.[k];
      return typeof v === "number" ? fmt(v) : v === undefined ? "–" : String(v);
    }));
  }
  return rows;
}

function chartsOf(loaded: Loaded): { key: string; group: string; metric: string; lines: Line[] }[] {
  const charts = new Map<string, { key: string; group: string; metric: string; lines: Line[] }>();
  for (const t of loaded.trials) {
    for (const answer of loaded.series.get(t.id) ?? []) {
      for (const s of answer.series) {
        const key = `${answer.group}/${s.metric}`;
        const chart = charts.get(key) ?? { key, group: answer.group, metric: s.metric, lines: [] };
        chart.lines.push({ id: String(t.id), label: `Trial ${t.id} (experiment ${t.experimentId})`, xs: s.batches, ys: s.values,
          color: trialColor(t.id), trialId: t.id });
        charts.set(key, chart);
      }
    }
  }
  return [...charts.values()].sort((a, b) => GROUPS.indexOf(a.group) - GROUPS.indexOf(b.group) || a.metric.localeCompare(b.metric));
}

export function ComparePage() {
  useTitle("Compare · Stalwart");
  const [params] = useSearchParams();
  const experimentIds = ids(params.get("experiments"));
  const trialIds = ids(params.get("trials"));
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const key = `${experimentIds.join(",")}|${trialIds.join(",")}`;

  usePoll(async (signal) => {
    const missing: string[] = [];
    const experiments = new Map<number, Experiment>();
    const trials: Trial[] = [];
    const soft = async <T,>(path: string, what: string): Promise<T | null> => {
      try { return await api.get<T>(path, signal); } catch (err) {
        if (err instanceof api.ApiError && (err.status === 404 || err.status === 403)) { missing.push(what); return null; }
        throw err;
      }
    };
    for (const id of experimentIds) {
      const [e, ts] = await Promise.all([
        soft<{ experiment: Experiment }>(`/experiments/${id}`, `experiment ${id}`),
        soft<{ trials?: Trial[] }>(`/experiments/${id}/trials?limit=${MAX_TRIALS}`, `trials of experiment ${id}`),
      ]);
      if (e) experiments.set(id, e.experiment);
      trials.push(...(ts?.trials ?? []));
    }
    const singles = await Promise.all(trialIds.map((id) => soft<{ trial: Trial }>(`/trials/${id}`, `trial ${id}`)));
    for (const s of singles) if (s && !trials.some((t) => t.id === s.trial.id)) trials.push(s.trial);
    trials.splice(MAX_TRIALS);
    const needed = [...new Set(trials.map((t) => t.experimentId))].filter((id) => !experiments.has(id));
    for (const id of needed) {
      const e = await soft<{ experiment: Experiment }>(`/experiments/${id}`, `experiment ${id}`);
      if (e) experiments.set(id, e.experiment);
    }
    const series = new Map<number, TrialSeriesAnswer[]>();
    await Promise.all(trials.map(async (t) => {
      series.set(t.id, await Promise.all(GROUPS.map((g) =>
        api.get<TrialSeriesAnswer>(`/ui/trials/${t.id}/series?group=${g}&maxPoints=500`, signal))));
    }));
    if (signal.aborted) return;
    trials.sort((a, b) => a.id - b.id);
    setLoaded({ trials, experiments, series, missing });
    return trials.some((t) => !isTerminal(t.state));
  }, key);

  const table = useMemo(() => (loaded ? tableOf(loaded) : []), [loaded]);
  const charts = useMemo(() => (loaded ? chartsOf(loaded) : []), [loaded]);
  const [onlyDiffs, setOnlyDiffs] = useState(false);
  const what = experimentIds.length ? `experiments ${experimentIds.join(", ")}` : `trials ${trialIds.join(", ")}`;

  if (!experimentIds.length && !trialIds.length) {
    return (
      <>
        <h1>Compare</h1>
        <p className="empty">Nothing to compare: select experiments on the <Link to="/experiments">Experiments</Link> page
          and choose Compare, or open #/compare?trials=1,2.</p>
      </>
    );
  }
  return (
    <>
      <h1 id="compare-title">Compare {what}</h1>
      {loaded && loaded.missing.length > 0 && <p className="error" role="alert" id="compare-missing">Not found: {loaded.missing.join(", ")}</p>}
      {loaded && loaded.trials.length === 0 && <p className="empty">These have no trials yet.</p>}
      <section aria-labelledby="compare-charts-title">
        <h2 id="compare-charts-title">Metrics</h2>
        <div id="compare-charts" className="charts">
          {charts.map((c, i) => (
            <figure key={c.key} data-key={c.key} aria-labelledby={`compare-${i}-caption`}>
              <figcaption id={`compare-${i}-caption`}>{c.metric} ({c.group})</figcaption>
              <LineChart lines={c.lines} xLabel="batches" yLabel={c.metric} legendLabel={`Trials of ${c.metric} (${c.group})`}
                syncKey="compare" aspect={0.5} />
            </figure>
          ))}
        </div>
      </section>
      <section aria-labelledby="compare-table-title">
        <h2 id="compare-table-title">Side by side</h2>
        <label className="check">
          <input type="checkbox" id="only-differences" checked={onlyDiffs} onChange={(e) => setOnlyDiffs(e.target.checked)} />
          Only rows that differ
        </label>
        <div className="scroll">
          <table id="compare-table" aria-labelledby="compare-table-title">
            <thead>
              <tr>
                <th scope="col">Trial</th>
                {(loaded?.trials ?? []).map((t) => (
                  <th key={t.id} scope="col" data-trial-id={t.id}>
                    <span className="trial-swatch" style={{ background: trialColor(t.id) }} aria-hidden="true" />
                    <Link to={`/trials/${t.id}`}>Trial {t.id}</Link>
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {table.filter((r) => !onlyDiffs || r.differs).map((r) => (
                <tr key={r.key} data-key={r.key} data-differs={r.differs ? "true" : "false"} className={r.differs ? "differs" : undefined}>
                  <th scope="row">{r.label}{r.differs && <span className="visually-hidden"> (differs)</span>}</th>
                  {r.values.map((v, i) => <td key={i}>{v}</td>)}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    </>
  );
}
