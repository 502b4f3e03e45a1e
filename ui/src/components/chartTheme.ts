// What the uPlot charts share: the theme's colours for axes and grid, sizes that keep an
// aspect (the canvas is drawn at the size it is shown, so text and points are never scaled),
// and tick labels through fmt().
import type uPlot from "uplot";
import { fmt } from "../format";

export const AXIS_FONT = "12px system-ui, -apple-system, 'Segoe UI', sans-serif";
export const LABEL_FONT = "600 12px system-ui, -apple-system, 'Segoe UI', sans-serif";

/** Height for a chart `width` wide: `aspect` of the width, within [min, max] CSS pixels. */
export function heightFor(width: number, aspect: number, min = 180, max = 380): number {
  return Math.round(Math.min(max, Math.max(min, width * aspect)));
}

/** An axis in the current theme's colours (read from the CSS variables on <html>). */
export function axis(label: string, extra: Partial<uPlot.Axis> = {}): uPlot.Axis {
  const css = getComputedStyle(document.documentElement);
  const fg = css.getPropertyValue("--muted").trim() || "#57606a";
  const line = css.getPropertyValue("--line").trim() || "#d0d7de";
  return {
    label,
    stroke: fg,
    font: AXIS_FONT,
    labelFont: LABEL_FONT,
    grid: { stroke: line, width: 1, dash: [2, 3] },
    ticks: { stroke: line, width: 1 },
    values: (_u: uPlot, splits: number[]) => tickLabels(splits, fmt),
    ...extra,
  };
}

/** Tick labels for uPlot's splits. On a log axis uPlot's filter hands the minor ticks it leaves
 * unlabelled as null (the splits are typed number[], but are not): those get no label, never
 * fmt's "–" for a missing value. */
export function tickLabels(splits: (number | null)[], format: (v: number) => string): string[] {
  return splits.map((v) => (v === null || !Number.isFinite(v) ? "" : format(v)));
}

/** Whether `[min, max]` shows less than the whole `[lo, hi]` (the user zoomed in). */
export const zoomedIn = (min: number, max: number, lo: number, hi: number): boolean =>
  min > lo + (hi - lo) * 1e-9 || max < hi - (hi - lo) * 1e-9;
