// The wire shapes the pages read (Determined's camelCase names), as far as the UI uses them.
export interface Experiment {
  id: number;
  name: string;
  state: string;
  progress?: number | null;
  searcherType?: string;
  numTrials?: number;
  bestTrialSearcherMetric?: number | null;
  bestTrialId?: number | null;
  searcherMetric?: string;
  labels?: string[];
  username?: string;
  displayName?: string;
  startTime?: string;
  endTime?: string | null;
  originalConfig?: string;
  projectId?: number;
  projectName?: string;
  workspaceId?: number;
  workspaceName?: string;
  config?: { searcher?: { metric?: string; smaller_is_better?: boolean } };
}

export interface Trial {
  id: number;
  experimentId: number;
  state: string;
  hparams?: Record<string, unknown>;
  totalBatchesProcessed?: number;
  restarts?: number;
  searcherMetricValue?: number | null;
  latestValidation?: { metrics?: { avgMetrics?: Record<string, unknown> } } | null;
  startTime?: string;
  endTime?: string | null;
  taskId?: string;
  logPolicyMatched?: string | null;
}

export interface Checkpoint {
  uuid: string;
  state: string;
  reportTime?: string;
  resources?: Record<string, number | string>;
  metadata?: { steps_completed?: number };
  training?: { trialId?: number; validationMetrics?: { avgMetrics?: Record<string, unknown> } };
}

export interface SeriesAnswer {
  trials: { trialId: number; batches: number[]; values: number[]; total: number }[];
}

export interface TrialSeriesAnswer {
  group: string;
  series: {
    metric: string; path?: string[]; batches: number[]; values: number[]; total: number;
    /** Report times (seconds since the Unix epoch) and top-level `epoch` values, per point. */
    times?: number[]; epochs?: (number | null)[] | null;
  }[];
}

export interface MetricNames { groups?: { group: string; metrics: string[] }[] }

/** More of `v1Experiment` (the list's optional columns read these by name). */
export interface ExperimentMore extends Experiment {
  archived?: boolean;
  description?: string;
  projectId?: number;
  projectName?: string;
  workspaceName?: string;
  forkedFrom?: number | null;
  duration?: number | null;
  resourcePool?: string;
  checkpointSize?: string | number;
  checkpointCount?: number;
  externalExperimentId?: string | null;
}

/** A trial as `POST /experiments-search` serves it next to its experiment (`bestTrial`). */
export interface TrialWithSummary extends Trial {
  summaryMetrics?: Record<string, Record<string, Record<string, unknown>>> | null;
}

/** `POST /experiments-search`. */
export interface SearchAnswer {
  experiments?: { experiment: ExperimentMore; bestTrial?: TrialWithSummary | null }[];
  pagination?: { total?: number; offset?: number; limit?: number };
}

/** `v1ProjectColumn` (`GET /projects/{id}/columns`). */
export interface ProjectColumn { column: string; location: string; type: string; displayName?: string | null }

/** One experiment's outcome of a bulk action (an empty `error` means done). */
export interface BulkResult { id: number; error?: string }

/** `v1Project`, as far as the move action uses it. */
export interface Project { id: number; name: string; workspaceId?: number; workspaceName?: string; archived?: boolean }
