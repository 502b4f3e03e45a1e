// The experiments list's columns: names as the master's column API and sort keys name them
// (`id`, `searcherMetricsVal`, `hp.lr`, `validation.validation_loss.min`), their headings, and
// each cell's value read from a row of `POST /experiments-search` (the experiment and its best
// trial: hyperparameters from `bestTrial.hparams`, metric summaries from
// `bestTrial.summaryMetrics`, the same trial the server sorts by).
import { bytes, fmt, hpText, short, when } from "../format";
import type { ExperimentMore, ProjectColumn, Trial, TrialWithSummary } from "../wire";

/** A row: the experiment, its best trial, and its first trial when it has no best one yet
 * (whose hyperparameters the master then shows and sorts by). */
export interface Row { experiment: ExperimentMore; bestTrial?: TrialWithSummary | null; firstTrial?: Trial | null }

/** The fixed columns the list knows how to show, with their headings. */
export const FIXED: [string, string][] = [
  ["id", "ID"], ["name", "Name"], ["state", "State"], ["progress", "Progress"],
  ["searcherType", "Searcher"], ["numTrials", "Trials"], ["searcherMetricsVal", "Best metric"],
  ["user", "User"], ["startTime", "Started"], ["endTime", "Ended"], ["duration", "Duration"],
  ["description", "Description"], ["tags", "Labels"], ["searcherMetric", "Searcher metric"],
  ["resourcePool", "Resource pool"], ["projectId", "Project"], ["forkedFrom", "Forked from"],
  ["checkpointCount", "Checkpoints"], ["checkpointSize", "Checkpoint size"],
  ["archived", "Archived"],
];

/** What a fresh list shows (the list before saved views existed). */
export const DEFAULT_COLUMNS = ["id", "name", "state", "progress", "searcherType", "numTrials",
  "searcherMetricsVal", "user", "startTime"];

const FIXED_NAMES = new Map(FIXED);

/** Whether a column is one of the experiment's own (no trial needed to fill it). */
export const isFixed = (name: string): boolean => FIXED_NAMES.has(name);

/** A column's heading: the fixed ones by name, `hp.lr` as "lr", metrics as
 * "validation_loss (min)". */
export function heading(name: string): string {
  const fixed = FIXED_NAMES.get(name);
  if (fixed) return fixed;
  if (name.startsWith("hp.")) return name.slice(3);
  const [group, ...rest] = name.split(".");
  const agg = rest.length > 1 ? rest.pop() : "last";
  return `${rest.join(".")} (${group === "validation" ? "" : `${group ?? ""} `}${agg ?? ""})`;
}

/** The picker's sections: fixed columns, hyperparameters, then metrics, from what the master
 * offers (`GET /projects/{id}/columns` of every project, merged). */
export function pickerSections(offered: ProjectColumn[]): [string, string[]][] {
  const hps = new Set<string>();
  const metrics = new Set<string>();
  for (const c of offered) {
    if (c.location === "LOCATION_TYPE_HYPERPARAMETERS") hps.add(c.column);
    else if (c.location !== "LOCATION_TYPE_EXPERIMENT") metrics.add(c.column);
  }
  const sorted = (s: Set<string>): string[] => [...s].sort((a, b) => a.localeCompare(b));
  return [["Experiment", FIXED.map(([n]) => n)], ["Hyperparameters", sorted(hps)], ["Metrics", sorted(metrics)]];
}

const GROUP_KEYS: Record<string, string> = { training: "avg_metrics", validation: "validation_metrics" };

function at(obj: unknown, path: string[]): unknown {
  let node = obj;
  for (const part of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** A hyperparameter's value in a trial; nested names are joined by dots. */
function hparam(trial: Trial | null | undefined, name: string): unknown {
  const hp = trial?.hparams;
  if (!hp) return undefined;
  if (name in hp) return hp[name];
  return at(hp, name.split("."));
}

function metric(trial: TrialWithSummary | null | undefined, name: string): unknown {
  const [group = "", ...rest] = name.split(".");
  let agg = "last";
  if (rest.length > 1 && ["last", "max", "mean", "min"].includes(rest[rest.length - 1] ?? "")) agg = rest.pop() ?? "last";
  const summary = trial?.summaryMetrics?.[GROUP_KEYS[group] ?? group]?.[rest.join(".")];
  return summary ? summary[agg] : undefined;
}

/** The text of a cell of column `name` in `row`. */
export function cellText(row: Row, name: string): string {
  const e = row.experiment;
  if (name.startsWith("hp.")) {
    const v = hparam(row.bestTrial ?? row.firstTrial, name.slice(3));
    return v === undefined ? "–" : hpText(v);
  }
  switch (name) {
    case "id": return String(e.id);
    case "name": return e.name;
    case "state": return short(e.state);
    case "progress": return `${Math.round((e.progress ?? (short(e.state) === "COMPLETED" ? 1 : 0)) * 100)}%`;
    case "searcherType": return e.searcherType ?? "";
    case "numTrials": return String(e.numTrials ?? 0);
    case "searcherMetricsVal": return fmt(e.bestTrialSearcherMetric);
    case "user": return e.displayName || e.username || "";
    case "startTime": return when(e.startTime);
    case "endTime": return when(e.endTime);
    case "duration": return typeof e.duration === "number" ? `${Math.round(e.duration / 1000)} s` : "–";
    case "description": return e.description ?? "";
    case "tags": return (e.labels ?? []).join(", ");
    case "searcherMetric": return e.searcherMetric ?? e.config?.searcher?.metric ?? "";
    case "resourcePool": return e.resourcePool ?? "";
    case "projectId": return e.projectName ? `${e.projectName} (${e.projectId ?? ""})` : String(e.projectId ?? "");
    case "forkedFrom": return e.forkedFrom ? String(e.forkedFrom) : "–";
    case "checkpointCount": return String(e.checkpointCount ?? 0);
    case "checkpointSize": return bytes(e.checkpointSize ?? 0);
    case "archived": return e.archived ? "yes" : "no";
    default: {
      const v = metric(row.bestTrial, name);
      return typeof v === "number" ? fmt(v) : v === undefined || v === null ? "–" : hpText(v);
    }
  }
}

/** Whether a column's cells are numbers (right-aligned). */
export const isNumeric = (name: string): boolean =>
  ["id", "numTrials", "searcherMetricsVal", "checkpointCount", "forkedFrom"].includes(name) ||
  (!FIXED_NAMES.has(name) && !name.startsWith("hp."));
