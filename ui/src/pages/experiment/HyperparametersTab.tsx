// The experiment page's Hyperparameters tab (#/experiments/ID/hyperparameters): how the search
// went. Parallel coordinates (every hyperparameter and the searcher metric, brushable), a
// scatter matrix (each numeric hyperparameter against the metric, and each pair of them) and a
// heat map (two hyperparameters binned, cells by the best or mean metric). Each trial is drawn
// in its colour (trialColor) and its searcher metric is the trial's `searcherMetricValue`.
// It reads nothing: the page polls the experiment and its trials.
import { useMemo, useState } from "react";
import { useNavigate } from "react-router-dom";
import { LabelledSelect } from "../../components/common";
import { HeatMap } from "../../components/HeatMap";
import { axisOf, hpTypes, rowsOf, valueOf } from "../../components/hpdata";
import { ParallelCoordinates } from "../../components/ParallelCoordinates";
import { ScatterChart } from "../../components/ScatterChart";
import type { Trial } from "../../wire";

interface Props { trials: Trial[]; searcherMetric: string; smallerIsBetter: boolean; config: unknown }

export function HyperparametersTab({ trials, searcherMetric, smallerIsBetter, config }: Props) {
  const navigate = useNavigate();
  const open = (id: number): void => navigate(`/trials/${id}`);
  const types = useMemo(() => hpTypes(config), [config]);
  const rows = useMemo(() => rowsOf(trials), [trials]);
  const keys = useMemo(() => [...new Set(rows.flatMap((r) => Object.keys(r.hp)))].sort(), [rows]);
  const hpAxes = keys.map((k) => axisOf(k, rows, types[k]));
  const axes = [...hpAxes, axisOf("", rows, undefined)];
  // The scatter matrix leaves out categorical and constant hyperparameters (a column of points).
  const numeric = hpAxes.filter((a) => a.kind !== "categorical" && a.max > a.min);
  // The heat map's default pair: the two hyperparameters that vary most (more distinct values).
  const varied = [...hpAxes].sort((a, b) => distinct(rows, b.key) - distinct(rows, a.key));
  const [hx, setHx] = useState("");
  const [hy, setHy] = useState("");
  const [how, setHow] = useState<"best" | "mean">("best");
  const xKey = keys.includes(hx) ? hx : (varied[0]?.key ?? "");
  const yKey = keys.includes(hy) ? hy : (varied.find((a) => a.key !== xKey)?.key ?? xKey);
  const xAxis = hpAxes.find((a) => a.key === xKey);
  const yAxis = hpAxes.find((a) => a.key === yKey);
  const metricLabel = searcherMetric || "searcher metric";
  const options = keys.map((k): [string, string] => [k, k]);

  if (keys.length === 0) return <p className="empty" id="hp-empty">This experiment has no hyperparameters.</p>;
  const pairs = numeric.flatMap((a, i) => numeric.slice(i + 1).map((b) => [a, b] as const));
  return (
    <>
      <h2 id="pc-title">Parallel coordinates</h2>
      <p className="muted">One line per trial, in its colour, through its hyperparameters and its best {metricLabel} (the value the searcher ranks it by). Drag along an axis to keep a range; click a line to open the trial.</p>
      <div id="parallel">
        <ParallelCoordinates rows={rows} axes={axes} metricLabel={metricLabel} onPick={open} />
      </div>

      <h2 id="matrix-title">Scatter matrix</h2>
      {numeric.length === 0 && <p className="empty">No numeric hyperparameter varies.</p>}
      <div id="scatter-matrix" className="scatter-matrix">
        {numeric.map((a) => (
          <figure key={a.key} data-key={`${a.key}|metric`}>
            <figcaption>{`${a.key} against ${metricLabel}`}</figcaption>
            <ScatterChart points={points(rows, a.key, "")} xLabel={a.key} yLabel={metricLabel} logX={a.kind === "log"} onPick={open} />
          </figure>
        ))}
        {pairs.map(([a, b]) => (
          <figure key={`${a.key}|${b.key}`} data-key={`${a.key}|${b.key}`}>
            <figcaption>{`${a.key} against ${b.key}`}</figcaption>
            <ScatterChart points={points(rows, a.key, b.key)} xLabel={a.key} yLabel={b.key} logX={a.kind === "log"} onPick={open} />
          </figure>
        ))}
      </div>

      <h2 id="heat-title">Heat map</h2>
      <div className="controls">
        <LabelledSelect id="heat-x" label="Across" value={xKey} options={options} onChange={setHx} />
        <LabelledSelect id="heat-y" label="Up" value={yKey} options={options} onChange={setHy} />
        <LabelledSelect id="heat-how" label="Cell" value={how} options={[["best", `best ${metricLabel}`], ["mean", `mean ${metricLabel}`]]}
          onChange={(v) => setHow(v === "mean" ? "mean" : "best")} />
      </div>
      <div id="heatmap">
        {xAxis && yAxis && <HeatMap rows={rows} x={xAxis} y={yAxis} how={how} smallerIsBetter={smallerIsBetter} metricLabel={metricLabel} />}
      </div>
    </>
  );
}

const distinct = (rows: ReturnType<typeof rowsOf>, key: string): number => new Set(rows.map((r) => JSON.stringify(valueOf(r, key) ?? null))).size;

/** The scatter's points: `xKey` across, `yKey` up (the metric when ""), trials having both. */
function points(rows: ReturnType<typeof rowsOf>, xKey: string, yKey: string) {
  return rows.flatMap((r) => {
    const x = valueOf(r, xKey);
    const y = valueOf(r, yKey);
    return typeof x === "number" && typeof y === "number" ? [{ id: r.id, label: `Trial ${r.id}`, x, y }] : [];
  });
}
