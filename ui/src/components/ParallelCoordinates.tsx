// Parallel coordinates in plain SVG: one vertical axis per hyperparameter and one for the
// searcher metric, one line per trial in its colour (trialColor). Dragging along an axis brushes
// a range (only the lines inside every brushed range stay lit; a click on the axis clears it),
// hovering a line names the trial, clicking it (or Enter on its focused line) opens the trial.
//
// DOM twin: each line is <path class="pc-line" data-trial-id data-color data-values (JSON of
// the axis keys to the values) data-active>; each axis <g class="pc-axis" data-key data-kind
// data-min data-max [data-brush="lo,hi" in axis units for numbers, the categories kept for
// categorical axes]>; #pc-count says how many trials are lit.
import { useState, type PointerEvent as ReactPointerEvent } from "react";
import { trialColor } from "../colors";
import { fmt, hpText } from "../format";
import { position, valueOf, type Axis, type HpRow } from "./hpdata";
import { useWidth } from "./useWidth";
import "./hpviz.css";

const HEIGHT = 340;
const TOP = 28;
const BOTTOM = 40;
const SIDE = 56;

interface Props {
  rows: HpRow[];
  axes: Axis[];
  metricLabel: string;
  onPick: (id: number) => void;
}

/** The axis value at a position in [0, 1] (numbers only). */
function valueAt(axis: Axis, p: number): number {
  if (axis.kind === "log") return 10 ** (Math.log10(axis.min) + p * (Math.log10(axis.max) - Math.log10(axis.min)));
  return axis.min + p * (axis.max - axis.min);
}

const title = (axis: Axis, metricLabel: string): string => (axis.key === "" ? metricLabel : axis.key);

export function ParallelCoordinates({ rows, axes, metricLabel, onPick }: Props) {
  const [box, width] = useWidth<HTMLDivElement>();
  const [brushes, setBrushes] = useState<Record<string, [number, number]>>({});
  const [drag, setDrag] = useState<{ key: string; from: number; to: number } | null>(null);
  const [hover, setHover] = useState<{ id: number; x: number; y: number } | null>(null);
  const plotH = HEIGHT - TOP - BOTTOM;
  const step = axes.length > 1 ? (Math.max(width, 320) - 2 * SIDE) / (axes.length - 1) : 0;
  const xOf = (i: number): number => SIDE + i * step;
  const yOf = (p: number): number => TOP + (1 - p) * plotH;
  const pOf = (y: number): number => Math.max(0, Math.min(1, 1 - (y - TOP) / plotH));

  const inside = (row: HpRow): boolean => axes.every((a) => {
    const b = brushes[a.key];
    if (!b) return true;
    const p = position(a, valueOf(row, a.key));
    return p !== null && p >= b[0] - 1e-9 && p <= b[1] + 1e-9;
  });
  const lit = rows.filter(inside);

  const localY = (ev: ReactPointerEvent<SVGRectElement>): number => {
    const svg = ev.currentTarget.ownerSVGElement;
    return svg ? ev.clientY - svg.getBoundingClientRect().top : 0;
  };
  const start = (key: string) => (ev: ReactPointerEvent<SVGRectElement>): void => {
    ev.currentTarget.setPointerCapture(ev.pointerId);
    const y = localY(ev);
    setDrag({ key, from: y, to: y });
  };
  const move = (ev: ReactPointerEvent<SVGRectElement>): void => {
    if (drag) setDrag({ ...drag, to: localY(ev) });
  };
  const end = (): void => {
    if (!drag) return;
    const next = { ...brushes };
    if (Math.abs(drag.to - drag.from) < 4) delete next[drag.key];  // a click clears the axis
    else {
      const a = pOf(drag.from);
      const b = pOf(drag.to);
      next[drag.key] = [Math.min(a, b), Math.max(a, b)];
    }
    setBrushes(next);
    setDrag(null);
  };

  const brushAttr = (a: Axis): string | undefined => {
    const b = brushes[a.key];
    if (!b) return undefined;
    if (a.kind === "categorical") {
      return a.values.filter((v) => { const p = position(a, v); return p !== null && p >= b[0] - 1e-9 && p <= b[1] + 1e-9; }).join(",");
    }
    return `${valueAt(a, b[0])},${valueAt(a, b[1])}`;
  };
  const hovered = hover ? rows.find((r) => r.id === hover.id) : undefined;
  const describe = (r: HpRow): string =>
    `Trial ${r.id}: ${axes.map((a) => `${title(a, metricLabel)} ${r.metric === null && a.key === "" ? "–" : hpText(valueOf(r, a.key))}`).join(", ")}`;

  if (rows.length === 0 || axes.length === 0) return <p className="empty">No trials yet.</p>;
  const svgW = Math.max(width, 320);
  return (
    <div className="hp-pc" ref={box}>
      <p id="pc-count" className="muted" data-lit={lit.length} data-total={rows.length}>
        {`${lit.length} of ${rows.length} trials in the brushed ranges.`}{Object.keys(brushes).length > 0 && (
          <> <button type="button" id="pc-clear" onClick={() => setBrushes({})}>Clear the ranges</button></>
        )}
      </p>
      <svg width={svgW} height={HEIGHT} role="group" aria-label={`Parallel coordinates of ${rows.length} trials over ${axes.length} axes`}>
        {rows.map((r) => {
          const on = lit.includes(r);
          const pts = axes.map((a, i) => {
            const p = position(a, valueOf(r, a.key));
            return p === null ? null : `${xOf(i).toFixed(1)},${yOf(p).toFixed(1)}`;
          }).filter((s): s is string => s !== null);
          const color = trialColor(r.id);
          const values = Object.fromEntries(axes.map((a) => [a.key === "" ? "metric" : a.key, valueOf(r, a.key) ?? null]));
          return (
            <path key={r.id} className={`pc-line${on ? "" : " dim"}${hover?.id === r.id ? " hover" : ""}`}
              d={`M${pts.join("L")}`} stroke={color} data-trial-id={r.id} data-color={color}
              data-values={JSON.stringify(values)} data-active={on ? "true" : "false"}
              tabIndex={on ? 0 : -1} role="link" aria-label={describe(r)}
              onMouseMove={(ev) => {
                const svg = ev.currentTarget.ownerSVGElement?.getBoundingClientRect();
                setHover({ id: r.id, x: ev.clientX - (svg?.left ?? 0), y: ev.clientY - (svg?.top ?? 0) });
              }}
              onMouseLeave={() => setHover(null)}
              onFocus={() => setHover({ id: r.id, x: xOf(0), y: TOP })} onBlur={() => setHover(null)}
              onClick={() => onPick(r.id)} onKeyDown={(ev) => { if (ev.key === "Enter") onPick(r.id); }} />
          );
        })}
        {axes.map((a, i) => {
          const b = brushes[a.key];
          const live = drag?.key === a.key ? [pOf(drag.from), pOf(drag.to)].sort((p, q) => p - q) : b;
          const ticks: [number, string][] = a.kind === "categorical"
            ? a.values.map((v) => [position(a, v) ?? 0, v])
            : a.max === a.min ? [[0.5, fmt(a.min)]] : [[0, fmt(a.min)], [0.5, fmt(valueAt(a, 0.5))], [1, fmt(a.max)]];
          return (
            <g key={a.key || "metric"} className="pc-axis" data-key={a.key === "" ? "metric" : a.key} data-kind={a.kind}
              data-min={a.kind === "categorical" ? undefined : a.min} data-max={a.kind === "categorical" ? undefined : a.max}
              data-brush={brushAttr(a)} transform={`translate(${xOf(i)},0)`}>
              <line y1={TOP} y2={TOP + plotH} className="pc-axis-line" />
              {ticks.map(([p, label]) => (
                <g key={label} transform={`translate(0,${yOf(p)})`}>
                  <line x2={-4} className="pc-axis-line" />
                  <text x={-6} dy="0.32em" textAnchor="end" className="pc-tick">{label}</text>
                </g>
              ))}
              <text y={TOP + plotH + 22} textAnchor="middle" className="pc-title">{`${title(a, metricLabel)}${a.kind === "log" ? " (log)" : ""}`}</text>
              {live && <rect className="pc-brush" x={-8} width={16} y={yOf(live[1] ?? 1)} height={Math.max(1, yOf(live[0] ?? 0) - yOf(live[1] ?? 1))} />}
              <rect className="pc-brush-area" data-axis={a.key === "" ? "metric" : a.key} x={-12} width={24} y={TOP} height={plotH}
                onPointerDown={start(a.key)} onPointerMove={move} onPointerUp={end} onPointerCancel={end}>
                <title>{`Drag to pick a range of ${title(a, metricLabel)}; click to clear it`}</title>
              </rect>
            </g>
          );
        })}
      </svg>
      {hover && hovered && (
        <div className="tooltip" role="status" style={{ left: Math.max(0, Math.min(hover.x + 12, svgW - 280)), top: Math.max(0, hover.y - 40) }}>
          {describe(hovered)}
        </div>
      )}
    </div>
  );
}
