// #/trials/ID: summary, training and validation charts (one chart per metric, a line per group),
// a smoothing slider (TensorBoard's EMA on the drawn lines, the raw ones kept faint),
// an x-axis picker (batches, epochs when reports carry one, wall time), system-metric charts
// from the profiler's groups against wall time (with units), checkpoints, and logs that
// follow; a failed trial's cause comes first (RunCause). The charts' cursors move together; polling stops once the trial has ended.
import { useCallback, useEffect, useRef, useState } from "react";
import { Link, useParams, useSearchParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll } from "../app";
import { GROUP_COLORS, lineColor } from "../colors";
import { CheckpointsPanel } from "../components/CheckpointsPanel";
import { LabelledSelect, Summary, useTitle } from "../components/common";
import { LineChart, type Line } from "../components/LineChart";
import { ema } from "../components/smoothing";
import { TrialLogs } from "../components/Logs";
import { TrialCauseBanner } from "../components/RunCause";
import { fmt, hpText, isTerminal, short } from "../format";
import { unitOf } from "../units";
import type { Experiment, MetricNames, Trial, TrialSeriesAnswer } from "../wire";

const METRIC_GROUPS = ["training", "validation"];
const SEP = "/";

/** A line with the other x values of its points: report times (seconds since the Unix epoch)
 * and epochs (null where a report had none). */
type TrialLine = Line & { times: number[]; epochs: (number | null)[] };
interface Chart { key: string; title: string; unit: string; lines: TrialLine[] }

/** What the x axis counts: batches, epochs (when the reports carry an `epoch`), or wall time. */
export type XAxis = "batches" | "epochs" | "time";
export const X_LABELS: Record<XAxis, string> = { batches: "batches", epochs: "epochs", time: "seconds since the trial started" };

/** The lines of a chart against `x`: epochs keep the points that have one; time counts seconds
 * from `start` (epoch seconds). */
export function against(lines: TrialLine[], x: XAxis, start: number): Line[] {
  return lines.map((l) => {
    if (x === "batches") return l;
    if (x === "time") return { ...l, xs: l.times.map((t) => Math.round((t - start) * 1000) / 1000) };
    const keep = l.epochs.flatMap((e, i) => (typeof e === "number" ? [i] : []));
    return { ...l, xs: keep.map((i) => l.epochs[i] ?? 0), ys: keep.map((i) => l.ys[i] ?? 0) };
  });
}

/** The image pull time of the trial's latest run that pulled ("none" when no run pulled). */
export function imagePull(allocations: { imagePullSeconds?: number | null }[]): string {
  const pulled = allocations.filter((a): a is { imagePullSeconds: number } => typeof a.imagePullSeconds === "number");
  const last = pulled[pulled.length - 1];
  if (!last) return allocations.length ? "none" : "–";
  const s = `${last.imagePullSeconds.toFixed(1)} s`;
  return pulled.length > 1 ? `${s} (latest of ${pulled.length} runs)` : s;
}

const others = (s: TrialSeriesAnswer["series"][number]): { times: number[]; epochs: (number | null)[] } => ({
  times: s.times ?? [], epochs: s.epochs ?? s.batches.map(() => null),
});

/** One chart per metric (a line per group) and one per profiler leaf metric (a line per place). */
export function chartsOf(answers: TrialSeriesAnswer[]): { metrics: Chart[]; system: Chart[] } {
  const metrics = new Map<string, Chart>();
  const system = new Map<string, Chart>();
  for (const answer of answers) {
    for (const s of answer.series) {
      if (METRIC_GROUPS.includes(answer.group)) {
        const chart = metrics.get(s.metric) ?? { key: s.metric, title: s.metric, unit: "", lines: [] };
        chart.lines.push({ id: answer.group, label: `${answer.group} ${s.metric}`, xs: s.batches, ys: s.values,
          color: GROUP_COLORS[answer.group] ?? lineColor(chart.lines.length), ...others(s) });
        metrics.set(s.metric, chart);
      } else {
        // Profiler groups nest by agent (and disk or GPU): one chart per leaf metric.
        const parts = (s.path ?? s.metric.split(SEP)).slice();
        const leaf = parts.pop() ?? s.metric;
        const key = `${answer.group}${SEP}${leaf}`;
        const chart = system.get(key) ?? { key, title: `${answer.group}: ${leaf}`, unit: unitOf(leaf), lines: [] };
        const where = parts.join(" · ") || answer.group;
        chart.lines.push({ id: where, label: where, xs: s.batches, ys: s.values, color: lineColor(chart.lines.length), ...others(s) });
        system.set(key, chart);
      }
    }
  }
  const sorted = (m: Map<string, Chart>): Chart[] => [...m.values()].sort((a, b) => a.key.localeCompare(b.key));
  return { metrics: sorted(metrics), system: sorted(system) };
}

export function TrialPage() {
  const { id } = useParams();
  return <TrialView key={id} id={Number(id)} />;
}

interface Loaded { t: Trial; facts: [string, string][]; metric: string; charts: ReturnType<typeof chartsOf> }

/** The lines drawn for a smoothing weight: each line smoothed (same id, colour and legend) and,
 * before it, its raw series faint (id `ID raw`); weight 0 draws the raw lines alone. */
export function smoothed(lines: Line[], weight: number): Line[] {
  if (weight <= 0) return lines;
  return lines.flatMap((l) => [
    { ...l, id: `${l.id} raw`, label: `${l.label} (raw)`, raw: true },
    { ...l, ys: ema(l.ys, weight) },
  ]);
}

function Charts({ charts, kind, syncKey, weight = 0, x, start }: {
  charts: Chart[]; kind: string; syncKey: string; weight?: number; x: XAxis; start: number;
}) {
  return (
    <div id={`${kind === "metric" ? "metric" : "system"}-charts`} className="charts">
      {charts.map((c, i) => (
        <figure key={c.key} className={`${kind}-chart`} data-key={c.key} aria-labelledby={`${kind}-${i}-caption`}>
          <figcaption id={`${kind}-${i}-caption`}>{c.unit ? `${c.title} (${c.unit})` : c.title}</figcaption>
          <LineChart lines={smoothed(against(c.lines, x, start), weight)} xLabel={X_LABELS[x]} yLabel={c.title} unit={c.unit} legendLabel={`Lines of ${c.title}`}
            axisLabel={kind === "system" ? (c.unit || c.key.split(SEP).pop()) : undefined}
            syncKey={syncKey} aspect={0.5} />
        </figure>
      ))}
    </div>
  );
}

function TrialView({ id }: { id: number }) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [metric, setMetric] = useState<string | null>(null);
  const [ended, setEnded] = useState(false);
  const [weight, setWeight] = useState(0);
  const [xAxis, setXAxis] = useState<XAxis>("batches");
  useTitle(`Trial ${id} · Stalwart`);
  const logsTitle = useRef<HTMLHeadingElement>(null);
  const toLogs = useCallback(() => {
    logsTitle.current?.scrollIntoView({ block: "start" });
    document.getElementById("logs")?.focus({ preventScroll: true });
  }, []);
  // #/trials/ID?logs=1 (the experiment's error banner links there): open at the logs.
  const [query] = useSearchParams();
  const wantLogs = query.get("logs") !== null;
  const ready = loaded !== null;
  useEffect(() => { if (wantLogs && ready) toLogs(); }, [wantLogs, ready, toLogs]);

  const [missing, setMissing] = useState(false);
  usePoll(async (signal) => {
    const found = await api.get<{ trial: Trial }>(`/trials/${id}`, signal).catch((err: unknown) => {
      if (isApiError(err, 404)) return null;
      throw err;
    });
    if (found === null) { setMissing(true); return false; }  // nothing to poll for
    const [{ trial: t }, names] = await Promise.all([
      api.get<{ trial: Trial }>(`/trials/${id}`, signal),
      api.get<MetricNames>(`/ui/trials/${id}/metric-names`, signal),
    ]);
    const done = isTerminal(t.state);
    const task = t.taskId ? await api.get<{ task?: { allocations?: { imagePullSeconds?: number | null }[] } }>(`/tasks/${encodeURIComponent(t.taskId)}`, signal).catch(() => null) : null;
    let searcherMetric = metric;
    if (searcherMetric === null) {
      const { experiment: e } = await api.get<{ experiment: Experiment }>(`/experiments/${t.experimentId}`, signal);
      searcherMetric = e.searcherMetric || e.config?.searcher?.metric || "";
      if (!signal.aborted) setMetric(searcherMetric);
    }
    const answers = await Promise.all((names.groups ?? []).map((g) =>
      api.get<TrialSeriesAnswer>(`/ui/trials/${id}/series?group=${encodeURIComponent(g.group)}&maxPoints=1000`, signal)));
    if (signal.aborted) return;
    const latest = t.latestValidation?.metrics?.avgMetrics ?? {};
    const facts: [string, string][] = [
      ["State", short(t.state)], ["Batches", String(t.totalBatchesProcessed ?? 0)],
      ["Restarts", String(t.restarts ?? 0)], ["Searcher metric", fmt(t.searcherMetricValue)],
      ...(t.logPolicyMatched ? [["Log policy", t.logPolicyMatched] as [string, string]] : []),
      ["Started", t.startTime ? new Date(t.startTime).toLocaleString() : "–"],
      ["Ended", t.endTime ? new Date(t.endTime).toLocaleString() : "–"],
      ["Image pull", imagePull(task?.task?.allocations ?? [])],
      ...Object.entries(t.hparams ?? {}).map(([k, v]): [string, string] => [k, hpText(v)]),
      ...Object.entries(latest).filter((kv): kv is [string, number] => typeof kv[1] === "number")
        .map(([k, v]): [string, string] => [`Latest validation ${k}`, fmt(v)]),
    ];
    setLoaded({ t, facts, metric: searcherMetric, charts: chartsOf(answers) });
    if (done) setEnded(true);
    return !done;  // an ended trial changes no more
  }, String(id));

  const t = loaded?.t;
  const charts = loaded?.charts;
  // Wall time counts from the trial's start (or its first report when the start is unknown).
  const firstReport = Math.min(...[...(charts?.metrics ?? []), ...(charts?.system ?? [])].flatMap((c) => c.lines.flatMap((l) => l.times)));
  const start = t?.startTime ? Date.parse(t.startTime) / 1000 : (Number.isFinite(firstReport) ? firstReport : 0);
  const hasEpochs = (charts?.metrics ?? []).some((c) => c.lines.some((l) => l.epochs.some((e) => typeof e === "number")));
  const metricX: XAxis = xAxis === "epochs" && !hasEpochs ? "batches" : xAxis;
  if (missing) {
    return (
      <>
        <p><Link to="/experiments">← Experiments</Link></p>
        <h1>Trial {id} not found</h1>
        <p className="empty">There is no trial {id}, or you may not see it.</p>
      </>
    );
  }
  return (
    <>
      <p>{t ? <Link to={`/experiments/${t.experimentId}`}>← Experiment {t.experimentId}</Link> : <Link to="/experiments">← Experiments</Link>}</p>
      <h1>{t ? `Trial ${t.id} of experiment ${t.experimentId}` : `Trial ${id}`}</h1>
      {t && <TrialCauseBanner trialId={id} version={`${t.state} ${t.restarts ?? 0}`} onLogs={toLogs} />}
      <Summary facts={loaded?.facts ?? []} />
      <h2 id="metrics-title">Training and validation metrics</h2>
      {charts && charts.metrics.length === 0 && <p className="empty" id="metrics-empty">No metrics reported yet.</p>}
      {charts && charts.metrics.length > 0 && (
        <div className="controls">
          <LabelledSelect id="x-axis" label="X axis" value={metricX}
            options={[["batches", "batches"], ...(hasEpochs ? [["epochs", "epochs"] as [string, string]] : []), ["time", "wall time"]]}
            onChange={(v) => setXAxis(v === "epochs" || v === "time" ? v : "batches")} />
          <label htmlFor="smoothing" className="field">
            Smoothing <input type="range" id="smoothing" min={0} max={0.99} step={0.01} value={weight}
              onChange={(ev) => setWeight(Number(ev.target.value))} /> <output htmlFor="smoothing" id="smoothing-value">{weight.toFixed(2)}</output>
          </label>
        </div>
      )}
      <Charts charts={charts?.metrics ?? []} kind="metric" syncKey={`trial-${id}-${metricX}`} weight={weight} x={metricX} start={start} />
      <h2 id="system-title">System metrics</h2>
      {(!charts || charts.system.length === 0) && (
        <p className="empty" id="system-empty">No system metrics: set profiling.enabled: true in the experiment config to record them.</p>
      )}
      {charts && charts.system.length > 0 && <p className="muted" id="system-hint">Against wall time: seconds since the trial started.</p>}
      <Charts charts={charts?.system ?? []} kind="system" syncKey={`trial-${id}-time`} x="time" start={start} />
      <h2 id="checkpoints-title">Checkpoints</h2>
      {loaded && <CheckpointsPanel base={`/trials/${id}`} sortBy="SORT_BY_BATCH_NUMBER" metric={loaded.metric} withTrial={false} ended={ended} />}
      <h2 id="logs-title" ref={logsTitle}>Logs</h2>
      <TrialLogs trialId={id} ended={ended} />
    </>
  );
}
