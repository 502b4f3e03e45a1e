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
  series: { metric: string; path?: string[]; batches: number[]; values: number[]; total: number }[];
}

export interface MetricNames { groups?: { group: string; metrics: string[] }[] }
