// A scatter of one point per trial (a hyperparameter against a metric): uPlot draws the axes and
// grid on canvas; each point is a real <button class="point" data-trial-id data-color> placed
// over it, so points are focusable, named (aria-label), and open the trial on click or Enter.
// A trial's point has the same colour as its line in the learning curves. The plot's root
// carries the tick labels uPlot drew last (data-x-ticks, data-y-ticks: JSON lists, "" for an
// unlabelled minor tick of a log axis), the DOM twin of the canvas' axes.
import { useEffect, useMemo, useRef, useState } from "react";
import uPlot from "uplot";
import { trialColor } from "../colors";
import { fmt } from "../format";
import { useTheme } from "../theme";
import { axis, heightFor, tickLabels } from "./chartTheme";
import { useWidth } from "./useWidth";

export interface Point { id: number; label: string; x: number; y: number }

interface Props {
  points: Point[];
  xLabel: string;
  yLabel: string;
  /** The y axis' title when it should be shorter than yLabel (narrow charts clip it). */
  axisLabel?: string;
  logX?: boolean;
  onPick?: (id: number) => void;
}

export function ScatterChart({ points, xLabel, yLabel, axisLabel, logX = false, onPick }: Props) {
  const [box, width] = useWidth<HTMLDivElement>();
  const plotRef = useRef<uPlot | null>(null);
  const [placed, setPlaced] = useState<{ left: number; top: number }[]>([]);
  const [shown, setShown] = useState<number | null>(null);
  const theme = useTheme();
  const pts = useMemo(() => points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)), [points]);
  const useLog = logX && pts.every((p) => p.x > 0);
  const dataKey = JSON.stringify(pts);
  const height = heightFor(width, 0.36, 180, 340);
  const sizeRef = useRef({ width, height });
  sizeRef.current = { width, height };
  const ptsRef = useRef(pts);
  ptsRef.current = pts;

  useEffect(() => {
    const node = box.current;
    const current = ptsRef.current;
    if (!node || sizeRef.current.width === 0 || current.length === 0) return undefined;
    const xs = current.map((p) => p.x);
    const ys = current.map((p) => p.y);
    // One hidden series holds every point (for the scales); the buttons are the points.
    const order = xs.map((_, i) => i).sort((a, b) => (xs[a] ?? 0) - (xs[b] ?? 0));
    const data: uPlot.AlignedData = [order.map((i) => xs[i] ?? 0), order.map((i) => ys[i] ?? null)];
    const pad = (lo: number, hi: number): [number, number] => {
      const d = hi > lo ? (hi - lo) * 0.08 : Math.abs(lo) * 0.1 || 1;
      return [lo - d, hi + d];
    };
    // The labels each axis was last given, written on the root after every draw.
    const ticks: [string[], string[]] = [[], []];
    const labelled = (i: 0 | 1) => (_u: uPlot, splits: number[]): string[] => {
      ticks[i] = tickLabels(splits, fmt);
      return ticks[i];
    };
    const place = (u: uPlot): void => {
      u.root.dataset.xTicks = JSON.stringify(ticks[0]);
      u.root.dataset.yTicks = JSON.stringify(ticks[1]);
      setPlaced(ptsRef.current.map((p) => ({ left: u.valToPos(p.x, "x"), top: u.valToPos(p.y, "y") })));
    };
    const plot = new uPlot({
      width: sizeRef.current.width,
      height: sizeRef.current.height,
      legend: { show: false },
      cursor: { show: false, drag: { x: false, y: false } },
      scales: {
        x: useLog ? { time: false, distr: 3, log: 10 } : { time: false, range: (_u, lo, hi) => pad(lo, hi) },
        y: { range: (_u, lo, hi) => pad(lo, hi) },
      },
      axes: [
        axis(useLog ? `${xLabel} (log)` : xLabel, { values: labelled(0) }),
        axis(axisLabel ?? yLabel, { size: 64, values: labelled(1) }),
      ],
      series: [{}, { paths: () => null, points: { show: false } }],
      hooks: { draw: [place] },
    }, data, node);
    plot.root.setAttribute("aria-hidden", "true");
    plotRef.current = plot;
    return () => { plot.destroy(); plotRef.current = null; };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [dataKey, useLog, xLabel, yLabel, axisLabel, theme, width === 0]);

  useEffect(() => { plotRef.current?.setSize({ width, height }); }, [width, height]);

  if (pts.length === 0) return <p className="empty">No trial has both values yet.</p>;
  const over = plotRef.current?.over;
  const offset = over && box.current
    ? { x: over.getBoundingClientRect().left - box.current.getBoundingClientRect().left, y: over.getBoundingClientRect().top - box.current.getBoundingClientRect().top }
    : { x: 0, y: 0 };
  const tip = shown === null ? undefined : pts[shown];
  const tipAt = shown === null ? undefined : placed[shown];
  return (
    <div className="chart-wrap">
      <div className="chart-plot" ref={box} role="group" aria-label={`${yLabel} against ${xLabel}, ${pts.length} trials`}>
        {placed.length === pts.length && pts.map((p, i) => {
          const at = placed[i] ?? { left: 0, top: 0 };
          const color = trialColor(p.id);
          return (
            <button key={p.id} type="button" className="point" data-trial-id={p.id} data-color={color} data-x={p.x} data-y={p.y}
              aria-label={`${p.label}: ${xLabel} ${fmt(p.x)}, ${yLabel} ${fmt(p.y)}`}
              style={{ left: offset.x + at.left, top: offset.y + at.top, background: color }}
              onMouseEnter={() => setShown(i)} onFocus={() => setShown(i)}
              onMouseLeave={() => setShown(null)} onBlur={() => setShown(null)}
              onClick={() => onPick?.(p.id)} />
          );
        })}
        {tip && tipAt && (
          <div className="tooltip" role="status" style={{ left: Math.max(0, Math.min(offset.x + tipAt.left + 12, width - 260)), top: Math.max(0, offset.y + tipAt.top - 40) }}>
            {`${tip.label} · ${xLabel} ${fmt(tip.x)} · ${yLabel} ${fmt(tip.y)}`}
          </div>
        )}
      </div>
    </div>
  );
}
