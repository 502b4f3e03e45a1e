// #/experiments/ID: summary and actions, learning curves of any metric (group and metric picked,
// kept in the hash), a hyperparameter-vs-metric scatter, the trials table, checkpoints, YAML.
// Polling stops once the experiment has ended and its data was read (it changes no more).
import { useMemo, useRef, useState } from "react";
import { Link, useNavigate, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, useHashQuery, usePoll } from "../app";
import { trialColor } from "../colors";
import { CheckpointsTable } from "../components/Checkpoints";
import { LabelledSelect, StateCell, Summary, useTitle } from "../components/common";
import { LineChart, type Line } from "../components/LineChart";
import { ScatterChart } from "../components/ScatterChart";
import { fmt, hpText, isTerminal, short, when } from "../format";
import type { Checkpoint, Experiment, MetricNames, SeriesAnswer, Trial } from "../wire";
import { ExperimentActions } from "./Experiments";

/** Points per trial asked of the server: fewer per line when many trials share a chart. */
export const pointsPerTrial = (trials: number): number => Math.max(100, Math.min(1000, Math.floor(20000 / Math.max(trials, 1))));

export function ExperimentPage() {
  const { id } = useParams();
  return <ExperimentView key={id} id={Number(id)} />;
}

interface Loaded { e: Experiment; trials: Trial[]; checkpoints: Checkpoint[] }

function ExperimentView({ id }: { id: number }) {
  const navigate = useNavigate();
  const [query, setQuery] = useHashQuery((q) => {
    setGroup(q.get("group") || "validation");
    setMetric(q.get("metric") ?? "");
    setHp(q.get("hp") ?? "");
  });
  const [group, setGroup] = useState(query.get("group") || "validation");
  const [metric, setMetric] = useState(query.get("metric") ?? "");
  const [hp, setHp] = useState(query.get("hp") ?? "");
  const [log, setLog] = useState(false);
  const [logX, setLogX] = useState(false);
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [names, setNames] = useState<string[] | null>(null);
  const [series, setSeries] = useState<{ key: string; data: SeriesAnswer } | null>(null);
  const polls = useRef(0);
  const namesFor = useRef<{ group: string; trials: number } | null>(null);
  const seriesKey = useRef("");

  const e = loaded?.e;
  const searcherMetric = e ? (e.searcherMetric || e.config?.searcher?.metric || "") : "";
  useTitle(e ? `${e.name} · Stalwart` : `Experiment ${id} · Stalwart`);
  const picked = metric || searcherMetric;

  const keep = (patch: { group?: string; metric?: string; hp?: string }): void => {
    setQuery({ group, metric, hp, ...patch });
  };

  const [missing, setMissing] = useState(false);
  const refresh = usePoll(async (signal) => {
    const found = await api.get<{ experiment: Experiment }>(`/experiments/${id}`, signal).catch((err: unknown) => {
      if (isApiError(err, 404)) return null;
      throw err;
    });
    if (found === null) { setMissing(true); return false; }  // nothing to poll for
    const [{ experiment }, trialsData, ckptData] = await Promise.all([
      api.get<{ experiment: Experiment }>(`/experiments/${id}`, signal),
      api.get<{ trials?: Trial[] }>(`/experiments/${id}/trials?limit=1000`, signal),
      api.get<{ checkpoints?: Checkpoint[] }>(`/experiments/${id}/checkpoints?sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_DESC&limit=100`, signal),
    ]);
    if (signal.aborted) return;
    const trials = trialsData.trials ?? [];
    setLoaded({ e: experiment, trials, checkpoints: ckptData.checkpoints ?? [] });
    const ended = isTerminal(experiment.state);
    const sm = experiment.searcherMetric || experiment.config?.searcher?.metric || "";
    polls.current += 1;
    // Metric names: read again when the group or the number of trials changed, while none was
    // found, and every 10th poll of a running experiment.
    let options = names ?? [];
    const stale = namesFor.current === null || namesFor.current.group !== group
      || namesFor.current.trials !== trials.length || options.length === 0 || (!ended && polls.current % 10 === 0);
    if (stale) {
      const answer = await api.get<MetricNames>(`/ui/experiments/${id}/metric-names`, signal);
      if (signal.aborted) return;
      const found = (answer.groups ?? []).find((x) => x.group === group)?.metrics ?? [];
      options = [...new Set([...(group === "validation" && sm ? [sm] : []), ...found])];
      setNames(options);
      namesFor.current = { group, trials: trials.length };
    }
    const want = options.includes(metric) ? metric : (options.includes(sm) ? sm : (options[0] ?? ""));
    if (want !== metric) setMetric(want);
    if (!want) return !ended;
    const n = pointsPerTrial(trials.length);
    const data = await api.get<SeriesAnswer>(`/ui/experiments/${id}/series?metric=${encodeURIComponent(want)}&group=${encodeURIComponent(group)}&maxPoints=${n}`, signal);
    if (signal.aborted) return;
    const key = JSON.stringify([group, want, data.trials]);
    if (key !== seriesKey.current) {  // a new chart only when the data changed (keeps the hover)
      seriesKey.current = key;
      setSeries({ key, data });
    }
    return !ended;  // an ended experiment changes no more: stop polling
  }, `${group} ${metric}`);

  const trials = useMemo(() => loaded?.trials ?? [], [loaded]);
  const hpKeys = useMemo(() => [...new Set(trials.flatMap((t) => Object.keys(t.hparams ?? {})))].sort(), [trials]);
  const numeric = hpKeys.filter((k) => trials.some((t) => typeof t.hparams?.[k] === "number"));
  const hpPicked = numeric.includes(hp) ? hp : (numeric.find((k) => k === "lr") ?? numeric[0] ?? "");
  const lines = useMemo<Line[]>(() => (series?.data.trials ?? []).map((s) => ({
    id: String(s.trialId), trialId: s.trialId, label: `Trial ${s.trialId}`, xs: s.batches, ys: s.values, color: trialColor(s.trialId),
  })), [series]);
  const latest = new Map((series?.data.trials ?? []).filter((s) => s.values.length).map((s) => [s.trialId, s.values[s.values.length - 1]]));
  const points = trials.flatMap((t) => {
    const y = latest.get(t.id);
    return typeof y === "number" ? [{ id: t.id, label: `Trial ${t.id}`, x: Number(t.hparams?.[hpPicked]), y }] : [];
  });

  const facts: [string, string][] = e ? [
    ["State", short(e.state)], ["Searcher", e.searcherType ?? ""],
    ["Metric", `${searcherMetric} (${e.config?.searcher?.smaller_is_better === false ? "larger" : "smaller"} is better)`],
    ["Progress", e.progress == null ? "–" : `${Math.round(e.progress * 100)}%`],
    ["Trials", String(e.numTrials ?? 0)], ["Best", fmt(e.bestTrialSearcherMetric)],
    ["Best trial", e.bestTrialId == null ? "–" : String(e.bestTrialId)],
    ["Labels", (e.labels ?? []).join(", ") || "–"],
    ["User", e.username ?? ""], ["Started", when(e.startTime)], ["Ended", when(e.endTime)],
  ] : [];
  const metricOptions = (names ?? (metric ? [metric] : [])).map((m): [string, string] => [m, m]);

  if (missing) {
    return (
      <>
        <p><Link to="/experiments">← Experiments</Link></p>
        <h1>Experiment {id} not found</h1>
        <p className="empty">There is no experiment {id}, or you may not see it.</p>
      </>
    );
  }
  return (
    <>
      <p><Link to="/experiments">← Experiments</Link></p>
      <h1>{e ? `Experiment ${e.id}: ${e.name}` : `Experiment ${id}`}</h1>
      <Summary facts={facts} />
      {e && <ExperimentActions id={id} state={e.state} after={refresh} />}

      <h2 id="chart-title">{picked ? `Learning curves: ${group} ${picked}` : "Learning curves"}</h2>
      <div className="controls">
        <LabelledSelect id="curve-group" label="Metrics" value={group} options={[["validation", "validation"], ["training", "training"]]}
          onChange={(g) => { setGroup(g); setNames(null); keep({ group: g }); }} />
        <LabelledSelect id="curve-metric" label="Metric" value={metric} options={metricOptions}
          onChange={(m) => { setMetric(m); keep({ metric: m }); }} />
        <label htmlFor="log-scale" className="field">
          <input type="checkbox" id="log-scale" checked={log} onChange={(ev) => setLog(ev.target.checked)} /> Log scale
        </label>
      </div>
      <div id="chart">
        {series && <LineChart lines={lines} xLabel="batches" yLabel={`${group} ${picked}`} log={log} legendLabel="Trials in the chart" />}
      </div>

      <h2 id="scatter-title">{hpPicked ? `${hpPicked} against ${group} ${picked}` : "Hyperparameters against the metric"}</h2>
      <p className="muted">Each point is a trial: its hyperparameter against the latest value of the metric picked above. Its colour is the trial&apos;s line above.</p>
      <div className="controls">
        <LabelledSelect id="scatter-hp" label="Hyperparameter" value={hpPicked} options={numeric.map((k): [string, string] => [k, k])}
          onChange={(h) => { setHp(h); keep({ hp: h }); }} />
        <label htmlFor="scatter-log" className="field">
          <input type="checkbox" id="scatter-log" checked={logX} onChange={(ev) => setLogX(ev.target.checked)} /> Log scale (hyperparameter)
        </label>
      </div>
      <div id="scatter">
        {series && <ScatterChart points={points} xLabel={hpPicked} yLabel={`latest ${group} ${picked}`} axisLabel={picked} logX={logX}
          onPick={(tid) => navigate(`/trials/${tid}`)} />}
      </div>

      <h2 id="trials-title">Trials</h2>
      <div className="scroll">
        <table id="trials" aria-labelledby="trials-title">
          <thead><tr>{["Trial", "State", ...hpKeys, "Batches", `Latest ${searcherMetric}`, `Best ${searcherMetric}`, "Restarts"].map((c) => <th key={c} scope="col">{c}</th>)}</tr></thead>
          <tbody>
            {trials.map((t) => {
              const last = t.latestValidation?.metrics?.avgMetrics?.[searcherMetric];
              return (
                <tr key={t.id} data-key={t.id}>
                  <td><Link to={`/trials/${t.id}`} aria-label={`Trial ${t.id}`}>{t.id}</Link></td>
                  <StateCell state={t.state} />
                  {hpKeys.map((k) => <td key={k}>{hpText(t.hparams?.[k])}</td>)}
                  <td className="num">{t.totalBatchesProcessed ?? 0}</td>
                  <td className="num">{fmt(typeof last === "number" ? last : null)}</td>
                  <td className="num">{fmt(t.searcherMetricValue)}</td>
                  <td className="num">{t.restarts ?? 0}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>

      <h2 id="checkpoints-title">Checkpoints</h2>
      <CheckpointsTable checkpoints={loaded?.checkpoints ?? null} metric={searcherMetric} withTrial />

      <details>
        <summary>Config (YAML as submitted)</summary>
        <pre className="config" id="config">{e?.originalConfig ?? ""}</pre>
      </details>
    </>
  );
}
