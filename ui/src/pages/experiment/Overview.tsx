// The experiment page's Overview tab: learning curves of any metric (group and metric picked,
// kept in the hash) and a hyperparameter-vs-metric scatter. It polls the metric names and the
// series while the experiment runs, and stops once it has ended and was read.
import { useMemo, useRef, useState } from "react";
import { useNavigate } from "react-router-dom";
import * as api from "../../api";
import { useHashQuery, usePoll } from "../../app";
import { trialColor } from "../../colors";
import { LabelledSelect } from "../../components/common";
import { LineChart, type Line } from "../../components/LineChart";
import { ScatterChart } from "../../components/ScatterChart";
import type { MetricNames, SeriesAnswer, Trial } from "../../wire";

/** Points per trial asked of the server: fewer per line when many trials share a chart. */
export const pointsPerTrial = (trials: number): number => Math.max(100, Math.min(1000, Math.floor(20000 / Math.max(trials, 1))));

/** Shown once the experiment was read (`searcherMetric` and `numTrials` are then known), before
 * its trials list arrives: the curves need only the experiment, the scatter fills in with the
 * trials. */
export function Overview({ id, trials, numTrials, searcherMetric, ended }: { id: number; trials: Trial[]; numTrials: number; searcherMetric: string; ended: boolean }) {
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
  const [names, setNames] = useState<string[] | null>(null);
  const [series, setSeries] = useState<{ key: string; data: SeriesAnswer } | null>(null);
  const polls = useRef(0);
  const namesFor = useRef<{ group: string; trials: number } | null>(null);
  const seriesKey = useRef("");
  const doneFor = useRef("");  // "group metric" whose series was read after the experiment ended
  const picked = metric || searcherMetric;

  const keep = (patch: { group?: string; metric?: string; hp?: string }): void => {
    setQuery({ group, metric, hp, ...patch });
  };

  usePoll(async (signal) => {
    const sm = searcherMetric;
    // The metric picked for the user below re-runs the poll (a new key): an ended experiment's
    // series for it was read already.
    if (ended && doneFor.current === `${group} ${metric}`) return false;
    polls.current += 1;
    // Metric names: read again when the group or the number of trials changed, while none was
    // found, and every 10th poll of a running experiment.
    let options = names ?? [];
    const stale = namesFor.current === null || namesFor.current.group !== group
      || namesFor.current.trials !== numTrials || options.length === 0 || (!ended && polls.current % 10 === 0);
    const n = pointsPerTrial(numTrials);
    const seriesOf = (m: string): Promise<SeriesAnswer> =>
      api.get<SeriesAnswer>(`/ui/experiments/${id}/series?metric=${encodeURIComponent(m)}&group=${encodeURIComponent(group)}&maxPoints=${n}`, signal);
    // The metric picked (or the searcher metric) is known before the names answer: its series
    // is asked for beside them, not after (kept only if the names list it).
    const guess = metric || (group === "validation" ? sm : "");
    let early: Promise<SeriesAnswer> | null = null;
    if (stale) {
      if (guess) {
        early = seriesOf(guess);
        early.catch(() => undefined);  // awaited below only when the guess holds
      }
      const answer = await api.get<MetricNames>(`/ui/experiments/${id}/metric-names`, signal);
      if (signal.aborted) return;
      const found = (answer.groups ?? []).find((x) => x.group === group)?.metrics ?? [];
      options = [...new Set([...(group === "validation" && sm ? [sm] : []), ...found])];
      setNames(options);
      namesFor.current = { group, trials: numTrials };
    }
    const want = options.includes(metric) ? metric : (options.includes(sm) ? sm : (options[0] ?? ""));
    if (!want) return !ended;
    const data = await (early && want === guess ? early : seriesOf(want));
    if (signal.aborted) return;
    const key = JSON.stringify([group, want, data.trials]);
    if (key !== seriesKey.current) {  // a new chart only when the data changed (keeps the hover)
      seriesKey.current = key;
      setSeries({ key, data });
    }
    if (ended) doneFor.current = `${group} ${want}`;
    // Set after the series is read: the new key starts a poll, which would abort this one.
    if (want !== metric) setMetric(want);
    return !ended;  // an ended experiment changes no more: stop polling
  }, `${group} ${metric} ${searcherMetric} ${ended}`);

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
  const metricOptions = (names ?? (metric ? [metric] : [])).map((m): [string, string] => [m, m]);

  return (
    <>
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
    </>
  );
}
