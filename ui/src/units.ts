// Units of the profiler's system metrics (core/_sysmetrics.py), shown on the chart's axis.
const UNITS: Record<string, string> = {
  cpu_util_simple: "%",
  memory_free: "GB",
  disk_util: "%",
  disk_iops: "ops/s",
  disk_throughput_read: "B/s",
  disk_throughput_write: "B/s",
  net_throughput_sent: "B/s",
  net_throughput_recv: "B/s",
  gpu_util: "%",
  gpu_free_memory: "B",
};

/** The unit of a system metric's leaf name ("" when unknown). */
export const unitOf = (leaf: string): string => UNITS[leaf] ?? "";

/** Units whose values are counts of bytes or operations: ticks read 7.04M rather than 7.04e+6. */
export const prefixed = (unit: string): boolean => ["B", "B/s", "ops/s"].includes(unit);
