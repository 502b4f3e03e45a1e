// Formatting shared by the pages: states, times, sizes and numbers.

/** `STATE_COMPLETED` -> `COMPLETED`. */
export const short = (state: string | null | undefined): string => (state ?? "").replace(/^STATE_/, "");

export const TERMINAL = ["COMPLETED", "CANCELED", "ERROR", "DELETED"];

/** Whether an experiment or trial state is final (nothing about it changes any more). */
export const isTerminal = (state: string | null | undefined): boolean => TERMINAL.includes(short(state));

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : "–");

/** A number for people: 4 significant digits, exponents for the very small and large. */
export function fmt(v: number | null | undefined): string {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

export function bytes(n: unknown): string {
  const v = Number(n);
  if (!Number.isFinite(v)) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let x = v;
  while (x >= 1000 && i < units.length - 1) { x /= 1000; i += 1; }
  return `${i ? x.toFixed(1) : x} ${units[i] ?? ""}`;
}

/** A hyperparameter's value for a cell: numbers formatted, strings as they are. */
export function hpText(v: unknown): string {
  if (typeof v === "number") return fmt(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v ?? null);
}

/** A number with an SI prefix (k, M, G, T) and 3 significant digits: 7.04e6 -> "7.04M". */
export function si(v: number): string {
  const a = Math.abs(v);
  for (const [limit, prefix] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]] as const) {
    if (a >= limit) return `${Number((v / limit).toPrecision(3))}${prefix}`;
  }
  return fmt(v);
}
