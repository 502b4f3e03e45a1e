// One colour per trial, the same on every chart of every page: the hue turns by the golden
// angle with the trial id, so neighbouring ids differ strongly and the palette never repeats
// after a handful of trials (10 colours did: trials 1 and 11 looked alike).
const GOLDEN_ANGLE = 137.508;

/** The colour of trial `id` (an `hsl()` string readable on both themes). */
export function trialColor(id: number): string {
  const hue = (id * GOLDEN_ANGLE) % 360;
  return `hsl(${hue.toFixed(1)}, 70%, 48%)`;
}

/** The colour of the `index`-th line of a chart that is not one line per trial. */
export const lineColor = (index: number): string => trialColor(index + 1);

/** Training and validation keep their colours on every trial chart. */
export const GROUP_COLORS: Record<string, string> = { training: "hsl(212, 80%, 45%)", validation: "hsl(24, 90%, 48%)" };
