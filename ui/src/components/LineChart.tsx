// Line charts through uPlot: one line per series (per trial on the experiment page), drawn on a
// canvas sized to its box (no stretching), a tooltip naming the series and point nearest the
// cursor, drag to zoom (double-click resets), and a cursor synced with the page's other charts.
//
// uPlot draws on canvas, so the chart has a DOM twin that people with screen readers and the
// tests read: the legend, one <li class="series"> per line carrying data-series-id (and
// data-trial-id), data-points (points drawn), data-last (the last value), data-x-last (its x), data-color and
// data-end ("left,top" of the last point in CSS pixels inside .u-over) and data-drawn (the points
// the plot holds, read back from uPlot after drawing); the chart's root says
// what it shows (role="img", aria-label) and, after a zoom, data-x-min/data-x-max.
import { useEffect, useMemo, useRef, useState } from "react";
import uPlot from "uplot";
import { fmt, si } from "../format";
import { useTheme } from "../theme";
import { prefixed } from "../units";
import { axis, heightFor, tickLabels, zoomedIn } from "./chartTheme";
import { faint } from "./smoothing";
import { useWidth } from "./useWidth";

export interface Line {
  id: string;
  label: string;
  xs: number[];
  ys: number[];
  color: string;
  trialId?: number;
  /** Drawn thin and faint (the raw series beside its smoothed line); its legend item says so. */
  raw?: boolean;
}

interface Props {
  lines: Line[];
  xLabel: string;
  yLabel: string;
  unit?: string;
  /** The y axis' title when it should be shorter than yLabel (a trial's system charts: the unit,
   * their caption names the metric). */
  axisLabel?: string;
  log?: boolean;
  legendLabel: string;
  /** Charts with the same key move their cursors together. */
  syncKey?: string;
  /** Height as a share of the width (kept within 180-380 px). */
  aspect?: number;
}

interface Hover { line: number; point: number; left: number; top: number }

/** The x values of every line, merged and sorted, and each line's y at each of them. An x a
 * line reports n times (a system metric sampled twice at one batch) appears n times, so every
 * point of every line has its own slot. */
function align(lines: Line[]): uPlot.AlignedData {
  const most = new Map<number, number>();
  for (const l of lines) {
    const seen = new Map<number, number>();
    for (const x of l.xs) {
      const n = (seen.get(x) ?? 0) + 1;
      seen.set(x, n);
      if (n > (most.get(x) ?? 0)) most.set(x, n);
    }
  }
  const start = new Map<number, number>();
  const xs: number[] = [];
  for (const x of [...most.keys()].sort((p, q) => p - q)) {
    start.set(x, xs.length);
    for (let k = 0; k < (most.get(x) ?? 0); k += 1) xs.push(x);
  }
  const out = lines.map((l) => {
    const ys = new Array<number | null>(xs.length).fill(null);
    const seen = new Map<number, number>();
    l.xs.forEach((x, j) => {
      const k = seen.get(x) ?? 0;
      seen.set(x, k + 1);
      ys[(start.get(x) ?? 0) + k] = l.ys[j] ?? null;
    });
    return ys;
  });
  return [xs, ...out] as uPlot.AlignedData;
}

/** [min, max] with `share` of the span as room on each side (a single value gets 10% of itself,
 * or one unit around 0). */
function padded(min: number, max: number, share: number): uPlot.Range.MinMax {
  const d = max > min ? (max - min) * share : Math.abs(min) * 0.1 || 1;
  return [min - d, max + d];
}

export function LineChart({ lines, xLabel, yLabel, unit = "", axisLabel, log = false, legendLabel, syncKey, aspect = 0.4 }: Props) {
  const [box, width] = useWidth<HTMLDivElement>();
  const plotRef = useRef<uPlot | null>(null);
  const legendRef = useRef<HTMLUListElement>(null);
  const zoom = useRef<[number, number] | null>(null);
  const linesRef = useRef(lines);
  linesRef.current = lines;  // what the plot's hooks read (set before the effects below run)
  const [hover, setHover] = useState<Hover | null>(null);
  const theme = useTheme();
  const useLog = log && lines.every((l) => l.ys.every((y) => y > 0));
  const yTitle = `${yLabel}${unit ? ` (${unit})` : ""}${useLog ? " (log)" : ""}`;
  const axisTitle = axisLabel === undefined ? yTitle : `${axisLabel}${useLog ? " (log)" : ""}`;
  const dataKey = useMemo(() => JSON.stringify(lines.map((l) => [l.id, l.label, l.color, l.xs, l.ys])), [lines]);
  const height = heightFor(width, aspect);
  const sizeRef = useRef({ width, height });
  sizeRef.current = { width, height };

  // (Re)create the plot when what it draws changes; a resize only resizes it.
  useEffect(() => {
    const node = box.current;
    const current = linesRef.current;
    if (!node || sizeRef.current.width === 0 || current.length === 0) return undefined;
    const xsAll = current.flatMap((l) => l.xs);
    const lo = Math.min(...xsAll);
    const hi = Math.max(...xsAll);
    // The mouse over this chart picks the point nearest to it; a cursor moved by a synced chart
    // (the mouse is elsewhere) picks the point nearest to its batch.
    let inside = false;
    const nearest = (u: uPlot): void => {
      const { left, top } = u.cursor;
      if (left === undefined || top === undefined || left < 0) { setHover(null); u.setSeries(null, { focus: true }); return; }
      let best: Hover | null = null;
      let bestD = 60 ** 2;
      linesRef.current.forEach((l, i) => {
        l.xs.forEach((x, j) => {
          const px = u.valToPos(x, "x");
          if (Math.abs(px - left) > 60) return;
          const py = u.valToPos(l.ys[j] ?? NaN, "y");
          const d = (px - left) ** 2 + (inside ? (py - top) ** 2 : 0);
          if (d < bestD) { bestD = d; best = { line: i, point: j, left: px, top: py }; }
        });
      });
      setHover(best);
      u.setSeries(best === null ? null : (best as Hover).line + 1, { focus: true });
    };
    const markEnds = (u: uPlot): void => {
      const items = legendRef.current?.querySelectorAll<HTMLLIElement>("li.series") ?? [];
      items.forEach((li, i) => {
        const l = linesRef.current[i];
        const n = l ? l.xs.length : 0;
        if (!l || n === 0) return;
        const x = u.valToPos(l.xs[n - 1] ?? 0, "x");
        const y = u.valToPos(l.ys[n - 1] ?? 0, "y");
        li.dataset.end = `${x.toFixed(1)},${y.toFixed(1)}`;
        li.dataset.drawn = String((u.data[i + 1] ?? []).filter((v) => v !== null && v !== undefined).length);
      });
    };
    const scaled = (u: uPlot, key: string): void => {
      if (key !== "x") return;
      const { min, max } = u.scales.x ?? {};
      if (min === undefined || max === undefined) return;
      zoom.current = zoomedIn(min, max, lo, hi) ? [min, max] : null;
      u.root.dataset.xMin = String(min);
      u.root.dataset.xMax = String(max);
    };
    const opts: uPlot.Options = {
      width: sizeRef.current.width,
      height: sizeRef.current.height,
      legend: { show: false },
      cursor: {
        drag: { x: true, y: false, setScale: true },
        points: { show: false },
        focus: { prox: -1 },
        ...(syncKey ? { sync: { key: syncKey } } : {}),
      },
      focus: { alpha: 0.2 },
      scales: {
        // A little room at both ends, so the first and last points are not on the edges.
        x: { time: false, range: (_u, min, max) => padded(min, max, 0.02) },
        y: useLog ? { distr: 3, log: 10 } : { range: (_u, min, max) => padded(min, max, 0.05) },
      },
      axes: [
        axis(xLabel),
        axis(axisTitle, {
          size: 64,
          ...(prefixed(unit) ? { values: (_u: uPlot, splits: number[]) => tickLabels(splits, si) } : {}),
        }),
      ],
      series: [
        {},
        ...current.map((l) => ({
          label: l.label, stroke: l.raw ? faint(l.color) : l.color, width: l.raw ? 1 : 1.6, spanGaps: true,
          points: { show: l.xs.length <= 2, size: 7, fill: l.color, stroke: l.color },
        })),
      ],
      hooks: { setCursor: [nearest], draw: [markEnds], setScale: [scaled] },
    };
    const plot = new uPlot(opts, align(current), node);
    plot.over.addEventListener("mouseenter", () => { inside = true; });
    plot.over.addEventListener("mouseleave", () => { inside = false; });
    plot.root.setAttribute("role", "img");
    plot.root.setAttribute("aria-label", `${yTitle} against ${xLabel}, ${current.length} ${current.some((l) => l.trialId !== undefined) ? "trials" : "lines"}`);
    if (zoom.current) plot.setScale("x", { min: zoom.current[0], max: zoom.current[1] });
    plotRef.current = plot;
    setHover(null);
    return () => { plot.destroy(); plotRef.current = null; };
    // dataKey stands for `lines` (compared by value: a poll that changed nothing redraws nothing).
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [dataKey, useLog, yTitle, axisTitle, xLabel, syncKey, theme, width === 0]);

  useEffect(() => { plotRef.current?.setSize({ width, height }); }, [width, height]);

  const show = (i: number): void => {
    const plot = plotRef.current;
    const l = lines[i];
    if (!plot || !l || l.xs.length === 0) return;
    const j = l.xs.length - 1;
    setHover({ line: i, point: j, left: plot.valToPos(l.xs[j] ?? 0, "x"), top: plot.valToPos(l.ys[j] ?? 0, "y") });
    plot.setSeries(i + 1, { focus: true });
  };
  const hide = (): void => { setHover(null); plotRef.current?.setSeries(null, { focus: true }); };

  if (lines.length === 0 || lines.every((l) => l.xs.length === 0)) {
    return <p className="empty">No data reported yet.</p>;
  }
  const over = plotRef.current?.over;
  const offset = over && box.current
    ? { x: over.getBoundingClientRect().left - box.current.getBoundingClientRect().left, y: over.getBoundingClientRect().top - box.current.getBoundingClientRect().top }
    : { x: 0, y: 0 };
  const hovered = hover ? lines[hover.line] : undefined;
  return (
    <>
      <div className="chart-wrap">
        <div className="chart-plot" ref={box}>
          {hover && hovered && (
            <>
              <span className="marker" style={{ left: offset.x + hover.left, top: offset.y + hover.top, background: hovered.color }} />
              <div className="tooltip" role="status" style={{ left: Math.max(0, Math.min(offset.x + hover.left + 12, width - 260)), top: Math.max(0, offset.y + hover.top - 40) }}>
                {`${hovered.label} · ${xLabel} ${hovered.xs[hover.point] ?? ""} · ${yLabel} ${prefixed(unit) ? si(hovered.ys[hover.point] ?? NaN) : fmt(hovered.ys[hover.point])}${unit ? ` ${unit}` : ""}`}
              </div>
            </>
          )}
        </div>
        <p className="chart-hint muted">Drag across the chart to zoom in; double-click to zoom out.</p>
      </div>
      <ul className="legend" aria-label={legendLabel} ref={legendRef}>
        {lines.map((l, i) => (
          <li key={l.id} className={`series${hover?.line === i ? " focused" : ""}`} data-series-id={l.id}
            data-trial-id={l.trialId} data-raw={l.raw ? "true" : undefined} data-points={l.xs.length} data-last={l.ys[l.ys.length - 1]} data-x-last={l.xs[l.xs.length - 1]} data-color={l.color}>
            <button type="button" onFocus={() => show(i)} onMouseEnter={() => show(i)} onBlur={hide} onMouseLeave={hide}>
              <span className="swatch" style={{ background: l.color }} />{l.label}
            </button>
          </li>
        ))}
      </ul>
    </>
  );
}
