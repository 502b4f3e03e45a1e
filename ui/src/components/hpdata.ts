// The data behind the Hyperparameters tab: one row per trial (its hyperparameters and its
// searcher metric), the axes those rows span (numeric, log or categorical), and the binning of
// the heat map. Pure functions, so the views and their DOM twins read the same numbers.
import { hpText } from "../format";
import type { Trial } from "../wire";

/** One trial: its id, its hyperparameters and its searcher metric (null before a validation). */
export interface HpRow { id: number; hp: Record<string, unknown>; metric: number | null }

/** An axis: numeric (linear or log) over [min, max], or categorical over `values` (in order). */
export interface Axis {
  key: string;
  kind: "linear" | "log" | "categorical";
  min: number;
  max: number;
  values: string[];
}

/** The hyperparameter types of an experiment's config (`{lr: {type: "log"}}` -> `{lr: "log"}`;
 * a bare constant is "const"). */
export function hpTypes(config: unknown): Record<string, string> {
  const hps = (config as { hyperparameters?: Record<string, unknown> } | undefined)?.hyperparameters ?? {};
  return Object.fromEntries(Object.entries(hps).map(([k, v]) => {
    const type = typeof v === "object" && v !== null && "type" in v ? String((v as { type: unknown }).type) : "const";
    return [k, type];
  }));
}

export function rowsOf(trials: Trial[]): HpRow[] {
  return trials.map((t) => ({
    id: t.id, hp: t.hparams ?? {}, metric: typeof t.searcherMetricValue === "number" ? t.searcherMetricValue : null,
  }));
}

/** The value of `key` on a row: the metric axis is the empty key. */
export const valueOf = (row: HpRow, key: string): unknown => (key === "" ? row.metric : row.hp[key]);

/** The axis of `key` over `rows`: categorical when the config says so or a value is not a
 * number, log when the config says "log" and every value is positive. */
export function axisOf(key: string, rows: HpRow[], type: string | undefined): Axis {
  const vals = rows.map((r) => valueOf(r, key)).filter((v) => v !== undefined && v !== null);
  const numeric = vals.every((v) => typeof v === "number" && Number.isFinite(v));
  if (type === "categorical" || !numeric) {
    const texts = [...new Set(vals.map(hpText))];
    if (vals.every((v) => typeof v === "number")) texts.sort((a, b) => Number(a) - Number(b));
    else texts.sort();
    return { key, kind: "categorical", min: 0, max: Math.max(texts.length - 1, 0), values: texts };
  }
  const nums = vals as number[];
  const min = nums.length ? Math.min(...nums) : 0;
  const max = nums.length ? Math.max(...nums) : 1;
  return { key, kind: type === "log" && min > 0 ? "log" : "linear", min, max, values: [] };
}

/** Where `v` lies on `axis`, from 0 (min) to 1 (max); null when it has no place. A single value
 * (or one category) lies in the middle. */
export function position(axis: Axis, v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (axis.kind === "categorical") {
    const i = axis.values.indexOf(hpText(v));
    if (i < 0) return null;
    return axis.values.length === 1 ? 0.5 : i / (axis.values.length - 1);
  }
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  if (axis.max === axis.min) return 0.5;
  if (axis.kind === "log") return (Math.log10(v) - Math.log10(axis.min)) / (Math.log10(axis.max) - Math.log10(axis.min));
  return (v - axis.min) / (axis.max - axis.min);
}

/** The heat map's bins of an axis: categories as they are, numbers in `n` equal bins (equal in
 * log10 on a log axis); each bin a label and a test of its values. */
export interface Bin { label: string; holds: (v: unknown) => boolean }

export function binsOf(axis: Axis, n = 5, label: (v: number) => string = String): Bin[] {
  if (axis.kind === "categorical") return axis.values.map((t) => ({ label: t, holds: (v) => v !== undefined && v !== null && hpText(v) === t }));
  if (axis.max === axis.min) return [{ label: label(axis.min), holds: (v) => v === axis.min }];
  const log = axis.kind === "log";
  const lo = log ? Math.log10(axis.min) : axis.min;
  const hi = log ? Math.log10(axis.max) : axis.max;
  const edge = (i: number): number => (log ? 10 ** (lo + ((hi - lo) * i) / n) : lo + ((hi - lo) * i) / n);
  return Array.from({ length: n }, (_, i) => {
    const a = i === 0 ? axis.min : edge(i);
    const b = i === n - 1 ? axis.max : edge(i + 1);
    return {
      label: `${label(a)}–${label(b)}`,
      holds: (v) => typeof v === "number" && v >= a && (i === n - 1 ? v <= b : v < b),
    };
  });
}

/** The cell value of the rows in a bin pair: the best (min or max) or the mean metric. */
export function aggregate(metrics: number[], how: "best" | "mean", smallerIsBetter: boolean): number | null {
  if (metrics.length === 0) return null;
  if (how === "mean") return metrics.reduce((s, m) => s + m, 0) / metrics.length;
  return smallerIsBetter ? Math.min(...metrics) : Math.max(...metrics);
}
