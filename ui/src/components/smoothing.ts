// Smoothing of drawn lines as TensorBoard does it: an exponential moving average with weight
// `w` in [0, 1), debiased at the start (so the first point is the first value, not w times 0).
// Applied to what is drawn only: the raw series stays faintly beside it.

/** The debiased EMA of `ys` with weight `w` (0: the values themselves). Non-finite values pass
 * through and do not enter the average. */
export function ema(ys: number[], w: number): number[] {
  if (w <= 0) return ys.slice();
  let last = 0;
  let n = 0;
  return ys.map((y) => {
    if (!Number.isFinite(y)) return y;
    last = last * w + (1 - w) * y;
    n += 1;
    return last / (1 - w ** n);
  });
}

/** `color` made faint (an hsl() colour gets an alpha; anything else is kept). */
export const faint = (color: string): string => color.replace(/^hsl\((.*)\)$/, "hsla($1, 0.3)");
