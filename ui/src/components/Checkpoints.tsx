// The checkpoints table of the experiment and trial pages (one page of them: CheckpointsPanel
// pages through them 100 at a time); `actions` adds a
// cell of buttons per row (CheckpointsPanel: copy UUID, register, delete).
import type { ReactNode } from "react";
import { Link } from "react-router-dom";
import { bytes, fmt, short, when } from "../format";
import type { Checkpoint } from "../wire";

export function CheckpointsTable({ checkpoints, metric, withTrial, actions }: {
  checkpoints: Checkpoint[] | null; metric: string; withTrial: boolean; actions?: (c: Checkpoint) => ReactNode;
}) {
  if (checkpoints === null) return null;
  const cols = ["UUID", ...(withTrial ? ["Trial"] : []), "Batches", "State", "Size", "Reported", metric ? `Validation ${metric}` : "Validation",
    ...(actions ? ["Actions"] : [])];
  return (
    <div className="scroll">
      <table id="checkpoints" aria-labelledby="checkpoints-title">
        <thead><tr>{cols.map((c) => <th key={c} scope="col">{c}</th>)}</tr></thead>
        <tbody>
          {checkpoints.map((c) => {
            const size = Object.values(c.resources ?? {}).reduce<number>((a, b) => a + Number(b || 0), 0);
            const tid = c.training?.trialId;
            const v = c.training?.validationMetrics?.avgMetrics?.[metric];
            const s = short(c.state);
            return (
              <tr key={c.uuid} data-key={c.uuid}>
                <td className="mono" title={c.uuid}>{c.uuid.slice(0, 8)}</td>
                {withTrial && <td>{tid == null ? "" : <Link to={`/trials/${tid}`}>{tid}</Link>}</td>}
                <td className="num">{c.metadata?.steps_completed ?? "–"}</td>
                <td className={`state state-${s}`}>{s}</td>
                <td className="num">{bytes(size)}</td>
                <td>{when(c.reportTime)}</td>
                <td className="num">{typeof v === "number" ? fmt(v) : "–"}</td>
                {actions && <td className="actions">{actions(c)}</td>}
              </tr>
            );
          })}
        </tbody>
      </table>
      {checkpoints.length === 0 && <p className="empty">No checkpoints yet.</p>}
    </div>
  );
}
