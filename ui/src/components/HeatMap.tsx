// A heat map in plain SVG: two hyperparameters binned (categories as they are, numbers in five
// equal bins, equal in log10 on a log axis), each cell coloured by the best or the mean searcher
// metric of the trials in it, with a legend from the worst to the best value.
//
// DOM twin: each cell is <rect class="hm-cell" data-x data-y (the bins' labels) data-value
// data-count data-trials (the trial ids, comma-separated)>; empty cells have no rect. The
// legend (#hm-legend) carries data-min and data-max.
import { fmt } from "../format";
import { aggregate, binsOf, valueOf, type Axis, type HpRow } from "./hpdata";
import { useWidth } from "./useWidth";
import "./hpviz.css";

interface Props {
  rows: HpRow[];
  x: Axis;
  y: Axis;
  how: "best" | "mean";
  smallerIsBetter: boolean;
  metricLabel: string;
}

/** The cell colour of `t` in [0, 1], 1 the best: dark violet (worst) to light yellow-green (best). */
export const heatColor = (t: number): string =>
  `hsl(${(270 - 190 * t).toFixed(0)}, 65%, ${(28 + 40 * t).toFixed(0)}%)`;

const LEFT = 120;
const BOTTOM = 48;
const CELL_H = 40;

export function HeatMap({ rows, x, y, how, smallerIsBetter, metricLabel }: Props) {
  const [box, width] = useWidth<HTMLDivElement>();
  const xBins = binsOf(x, 5, fmt);
  const yBins = binsOf(y, 5, fmt);
  const measured = rows.filter((r): r is HpRow & { metric: number } => r.metric !== null);
  const cells = yBins.flatMap((yb, j) => xBins.map((xb, i) => {
    const inCell = measured.filter((r) => xb.holds(valueOf(r, x.key)) && yb.holds(valueOf(r, y.key)));
    return { i, j, x: xb.label, y: yb.label, trials: inCell.map((r) => r.id), value: aggregate(inCell.map((r) => r.metric), how, smallerIsBetter) };
  })).filter((c): c is typeof c & { value: number } => c.value !== null);
  if (cells.length === 0) return <p className="empty">No trial has a searcher metric yet.</p>;
  const values = cells.map((c) => c.value);
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const goodness = (v: number): number => (hi === lo ? 1 : smallerIsBetter ? (hi - v) / (hi - lo) : (v - lo) / (hi - lo));
  const w = Math.max(width, 320);
  const cellW = (w - LEFT - 8) / xBins.length;
  const h = yBins.length * CELL_H + BOTTOM;
  const stops = Array.from({ length: 10 }, (_, k) => k / 9);
  return (
    <div className="hp-heat" ref={box}>
      <svg width={w} height={h} role="group" aria-label={`${how} ${metricLabel} by ${x.key} and ${y.key}`}>
        {yBins.map((b, j) => (
          <text key={b.label} x={LEFT - 6} y={(yBins.length - 1 - j) * CELL_H + CELL_H / 2} dy="0.32em" textAnchor="end" className="pc-tick">{b.label}</text>
        ))}
        {xBins.map((b, i) => (
          <text key={b.label} x={LEFT + (i + 0.5) * cellW} y={yBins.length * CELL_H + 16} textAnchor="middle" className="pc-tick">{b.label}</text>
        ))}
        <text x={LEFT + (w - LEFT) / 2} y={yBins.length * CELL_H + 38} textAnchor="middle" className="pc-title">{x.key}</text>
        <text x={4} y={yBins.length * CELL_H + 38} className="pc-title">{`↑ ${y.key}`}</text>
        {cells.map((c) => (
          <g key={`${c.i} ${c.j}`}>
            <rect className="hm-cell" x={LEFT + c.i * cellW + 1} y={(yBins.length - 1 - c.j) * CELL_H + 1} width={cellW - 2} height={CELL_H - 2}
              fill={heatColor(goodness(c.value))} data-x={c.x} data-y={c.y} data-value={c.value} data-count={c.trials.length}
              data-trials={c.trials.join(",")}>
              <title>{`${x.key} ${c.x}, ${y.key} ${c.y}: ${how} ${metricLabel} ${fmt(c.value)} over ${c.trials.length} trial${c.trials.length === 1 ? "" : "s"} (${c.trials.map((t) => `#${t}`).join(", ")})`}</title>
            </rect>
            <text x={LEFT + (c.i + 0.5) * cellW} y={(yBins.length - 1 - c.j) * CELL_H + CELL_H / 2} dy="0.32em" textAnchor="middle"
              className={`hm-label${goodness(c.value) > 0.6 ? " on-light" : ""}`}>{fmt(c.value)}</text>
          </g>
        ))}
      </svg>
      <div id="hm-legend" className="hm-legend" data-min={lo} data-max={hi} aria-label={`Colour legend: ${how} ${metricLabel} from ${fmt(smallerIsBetter ? hi : lo)} (worst) to ${fmt(smallerIsBetter ? lo : hi)} (best)`}>
        <span>{`${fmt(smallerIsBetter ? hi : lo)} (worst)`}</span>
        <svg width={160} height={14} aria-hidden="true">
          {stops.map((t, k) => <rect key={t} x={k * 16} width={16} height={14} fill={heatColor(t)} />)}
        </svg>
        <span>{`${fmt(smallerIsBetter ? lo : hi)} (best)`}</span>
      </div>
    </div>
  );
}
