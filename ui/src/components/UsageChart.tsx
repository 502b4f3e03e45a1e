// The Cluster page's usage over time: slot-hours allocated per day over the last `days` days
// (GET /resources/allocation/aggregated, period DAILY: slot-seconds per day, admins only; read
// once per visit), drawn as bars by uPlot. Its DOM twin is the table under it: one row per day with usage
// (`tr[data-day]`, `data-slot-hours`), and the chart's root carries `data-days` and
// `data-total` (slot-hours in the window). A caller who is not an admin is told usage is for
// administrators.
import { useEffect, useRef, useState } from "react";
import uPlot from "uplot";
import * as api from "../api";
import { isApiError, usePoll } from "../app";
import { useTheme } from "../theme";
import { axis, heightFor, tickLabels } from "./chartTheme";
import { Table } from "./common";
import { useWidth } from "./useWidth";

interface Entry { periodStart: string; seconds: number; byUsername?: Record<string, number> }

/** `YYYY-MM-DD` of a UTC date. */
const day = (d: Date): string => d.toISOString().slice(0, 10);
/** Slot-hours for people: 3 significant digits, never an exponent. */
export const hours = (h: number): string => (h === 0 ? "0" : h < 1e-4 ? "< 0.0001" : String(Number(h.toPrecision(3))));
/** A day's tick for people: "Dec 4" (UTC, as the master counts days). */
const dayTick = (seconds: number): string => new Date(seconds * 1000).toLocaleDateString(undefined, { month: "short", day: "numeric", timeZone: "UTC" });

export function UsageChart({ days = 30 }: { days?: number }) {
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [refused, setRefused] = useState("");
  const [box, width] = useWidth<HTMLDivElement>();
  const theme = useTheme();
  const plotRef = useRef<uPlot | null>(null);
  const height = heightFor(width, 0.3, 160, 280);

  usePoll(async (signal) => {
    const end = new Date();
    const start = new Date(end.getTime() - (days - 1) * 86_400_000);
    const qs = new URLSearchParams({ startDate: day(start), endDate: day(end), period: "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY" });
    try {
      const answer = await api.get<{ resourceEntries?: Entry[] }>(`/resources/allocation/aggregated?${qs.toString()}`, signal);
      if (signal.aborted) return;
      // Every day of the window, those without usage at 0.
      const by = new Map((answer.resourceEntries ?? []).map((e) => [e.periodStart, e]));
      const all: Entry[] = [];
      for (let i = 0; i < days; i += 1) {
        const d = day(new Date(start.getTime() + i * 86_400_000));
        all.push(by.get(d) ?? { periodStart: d, seconds: 0 });
      }
      setEntries(all);
    } catch (err) {
      if (isApiError(err, 403)) { setRefused("Usage over time is shown to administrators."); return false; }
      throw err;
    }
    return false;  // read once per visit: a day's total changes slowly
  }, `usage ${days}`);

  const dataKey = JSON.stringify(entries?.map((e) => [e.periodStart, e.seconds]));
  useEffect(() => {
    const node = box.current;
    if (!node || !entries || width === 0) return undefined;
    const xs = entries.map((e) => Date.parse(`${e.periodStart}T00:00:00Z`) / 1000);
    const ys = entries.map((e) => e.seconds / 3600);
    const bars = ys.map((y) => (y > 0 ? y : null));  // a day without usage draws nothing
    const accent = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#0969da";
    const plot = new uPlot({
      width, height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      scales: {
        x: { time: true, range: (_u, lo, hi) => [lo - 43_200, hi + 43_200] },
        y: { range: (_u, _lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] },
      },
      axes: [
        axis("day (UTC)", { values: (_u: uPlot, splits: number[]) => tickLabels(splits, dayTick) }),
        axis("slot-hours", { size: 64 }),
      ],
      series: [{}, {
        label: "slot-hours", stroke: accent, fill: accent, width: 1,
        paths: uPlot.paths.bars?.({ size: [0.7, 40], align: 0 }), points: { show: false },
      }],
    }, [xs, bars], node);
    plot.root.setAttribute("role", "img");
    const total = ys.reduce((a, b) => a + b, 0);
    plot.root.setAttribute("aria-label", `Slot-hours allocated per day, last ${days} days: ${hours(total)} slot-hours in all`);
    plot.root.dataset.days = String(entries.length);
    plot.root.dataset.total = String(total);
    plotRef.current = plot;
    return () => { plot.destroy(); plotRef.current = null; };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [dataKey, theme, width === 0, days]);
  useEffect(() => { plotRef.current?.setSize({ width, height }); }, [width, height]);

  if (refused) return <p className="muted" id="usage-refused">{refused}</p>;
  const used = (entries ?? []).filter((e) => e.seconds > 0);
  return (
    <div className="chart-wrap" id="usage">
      <div className="chart-plot" ref={box} />
      {entries && used.length === 0 && <p className="empty" id="usage-empty">No slots were allocated in the last {days} days.</p>}
      {used.length > 0 && (
        <details id="usage-days">
          <summary>Days with usage ({used.length})</summary>
          <Table id="usage-table" labelledBy="usage-title" columns={["Day (UTC)", "Slot-hours", "By user"]}>
            {used.slice().reverse().map((e) => (
              <tr key={e.periodStart} data-day={e.periodStart} data-slot-hours={e.seconds / 3600}>
                <td>{e.periodStart}</td>
                <td className="num">{hours(e.seconds / 3600)}</td>
                <td>{Object.entries(e.byUsername ?? {}).map(([u, s]) => `${u} ${hours(s / 3600)}`).join(", ")}</td>
              </tr>
            ))}
          </Table>
        </details>
      )}
    </div>
  );
}
