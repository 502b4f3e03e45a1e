// The checkpoints of an experiment or a trial with what a user does to them: DELETED ones
// (garbage-collected or deleted) hidden unless asked for, copy a UUID, register one as a
// model's next version (an existing model or a new one), delete one after a confirmation
// (DELETE /api/v1/checkpoints). Read 100 at a time (offset/limit), with the total and
// Previous / Next. Polls while the run can still change, and after each action.
import { useRef, useState } from "react";
import * as api from "../api";
import { usePoll, useShell } from "../app";
import { short } from "../format";
import type { Checkpoint } from "../wire";
import { CheckpointsTable } from "./Checkpoints";
import "./debug.css";

/** Every checkpoint state but DELETED (the listing's `states` filter). */
export const KEPT_STATES = ["STATE_ACTIVE", "STATE_COMPLETED", "STATE_ERROR", "STATE_PARTIALLY_DELETED"];

interface Model { name: string }

/** Checkpoints on a page of the table. */
export const CHECKPOINTS_PAGE = 100;

/** `base` is `/experiments/ID` or `/trials/ID`; `sortBy` the listing's sortByAttr. */
export function CheckpointsPanel({ base, sortBy, metric, withTrial, ended }: {
  base: string; sortBy: string; metric: string; withTrial: boolean; ended: boolean;
}) {
  const { toast, handle } = useShell();
  const [showDeleted, setShowDeleted] = useState(false);
  const [checkpoints, setCheckpoints] = useState<Checkpoint[] | null>(null);
  const [page, setPage] = useState(0);
  const [total, setTotal] = useState(0);
  const [registering, setRegistering] = useState<string | null>(null);
  const now = usePoll(async (signal) => {
    const qs = new URLSearchParams({
      sortByAttr: sortBy, orderBy: "ORDER_BY_DESC", offset: String(page * CHECKPOINTS_PAGE), limit: String(CHECKPOINTS_PAGE),
    });
    if (!showDeleted) for (const s of KEPT_STATES) qs.append("states", s);
    const answer = await api.get<{ checkpoints?: Checkpoint[]; pagination?: { total?: number } }>(`${base}/checkpoints?${qs.toString()}`, signal);
    if (signal.aborted) return;
    const count = answer.pagination?.total ?? 0;
    setTotal(count);
    // a page emptied by deletions: show the last one that has checkpoints
    if (page > 0 && page * CHECKPOINTS_PAGE >= count) { setPage(Math.max(0, Math.ceil(count / CHECKPOINTS_PAGE) - 1)); return false; }
    setCheckpoints(answer.checkpoints ?? []);
    return !ended;
  }, `${base} ${showDeleted} ${ended} ${page}`);
  const pages = Math.max(1, Math.ceil(total / CHECKPOINTS_PAGE));
  const first = page * CHECKPOINTS_PAGE;

  const copy = (uuid: string): void => {
    navigator.clipboard.writeText(uuid).then(() => toast(`Copied ${uuid}`), handle);
  };
  const remove = async (uuid: string): Promise<void> => {
    if (!window.confirm(`Delete checkpoint ${uuid}? Its files are removed from storage.`)) return;
    try {
      await api.call("DELETE", "/checkpoints", { checkpointUuids: [uuid] });
      toast(`Checkpoint ${uuid.slice(0, 8)} deleted`);
      now();
    } catch (err) { handle(err); }
  };
  const actions = (c: Checkpoint): React.ReactNode => {
    const s = short(c.state);
    const short8 = c.uuid.slice(0, 8);
    return (
      <>
        <button type="button" data-action="copy" aria-label={`Copy UUID of checkpoint ${short8}`} onClick={() => copy(c.uuid)}>Copy UUID</button>
        <button type="button" data-action="register" aria-label={`Register checkpoint ${short8}`} disabled={s !== "COMPLETED"}
          onClick={() => setRegistering(c.uuid)}>Register</button>
        <button type="button" className="danger" data-action="delete" aria-label={`Delete checkpoint ${short8}`} disabled={s === "DELETED"}
          onClick={() => void remove(c.uuid)}>Delete</button>
      </>
    );
  };
  return (
    <>
      <div className="controls">
        <label htmlFor="show-deleted" className="field">
          <input type="checkbox" id="show-deleted" checked={showDeleted} onChange={(e) => { setShowDeleted(e.target.checked); setPage(0); }} /> Show deleted checkpoints
        </label>
      </div>
      <CheckpointsTable checkpoints={checkpoints} metric={metric} withTrial={withTrial} actions={actions} />
      {checkpoints !== null && total > 0 && (
        <nav className="pager" aria-label="Pages of checkpoints" id="checkpoints-pager">
          <button type="button" disabled={page === 0} aria-label="Previous page of checkpoints" onClick={() => setPage(page - 1)}>Previous</button>
          <span id="checkpoints-range" aria-live="polite">
            {`${first + 1}–${first + checkpoints.length} of ${total} checkpoints`}{pages > 1 ? ` (page ${page + 1} of ${pages})` : ""}
          </span>
          <button type="button" disabled={page + 1 >= pages} aria-label="Next page of checkpoints" onClick={() => setPage(page + 1)}>Next</button>
        </nav>
      )}
      {registering && <RegisterDialog uuid={registering} onClose={() => setRegistering(null)} />}
    </>
  );
}

/** Register checkpoint `uuid` into a model picked from the registry or named anew. */
function RegisterDialog({ uuid, onClose }: { uuid: string; onClose: () => void }) {
  const { toast, handle } = useShell();
  const [models, setModels] = useState<Model[] | null>(null);
  const [picked, setPicked] = useState("");
  const [fresh, setFresh] = useState("");
  const [busy, setBusy] = useState(false);
  const dialog = useRef<HTMLDialogElement | null>(null);
  usePoll(async (signal) => {
    const answer = await api.get<{ models?: Model[] }>("/models?limit=1000", signal);
    if (!signal.aborted) setModels((answer.models ?? []).slice().sort((a, b) => a.name.localeCompare(b.name)));
    return false;
  }, uuid);
  const open = (node: HTMLDialogElement | null): void => {
    dialog.current = node;
    if (node && !node.open) node.showModal();
  };
  const submit = async (): Promise<void> => {
    const name = fresh.trim() || picked;
    if (!name) { toast("Pick a model or name a new one"); return; }
    setBusy(true);
    try {
      if (fresh.trim()) await api.post("/models", { name });
      const answer = await api.post<{ modelVersion?: { version?: number } }>(`/models/${encodeURIComponent(name)}/versions`, { checkpointUuid: uuid, modelName: name });
      toast(`Registered as version ${answer.modelVersion?.version ?? "?"} of ${name}`);
      onClose();
    } catch (err) { handle(err); } finally { setBusy(false); }
  };
  return (
    <dialog ref={open} id="register-dialog" aria-labelledby="register-title" onClose={onClose}>
      <form method="dialog" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
        <h2 id="register-title">Register checkpoint {uuid.slice(0, 8)}</h2>
        <label htmlFor="register-model">Model</label>
        <select id="register-model" value={picked} onChange={(e) => setPicked(e.target.value)} disabled={!models?.length}>
          <option value="">{models === null ? "Reading models…" : (models.length ? "Pick a model" : "No models yet")}</option>
          {(models ?? []).map((m) => <option key={m.name} value={m.name}>{m.name}</option>)}
        </select>
        <label htmlFor="register-new">Or a new model named</label>
        <input id="register-new" value={fresh} onChange={(e) => setFresh(e.target.value)} autoComplete="off" />
        <div className="dialog-actions">
          <button type="button" onClick={() => dialog.current?.close()}>Cancel</button>
          <button type="submit" className="primary" disabled={busy}>Register</button>
        </div>
      </form>
    </dialog>
  );
}
