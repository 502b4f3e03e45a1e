// The experiment page's Continue and Fork actions (Determined's `det e continue` and the web UI's
// fork). Continue: a finished single-trial experiment trains on, its trial from its latest
// checkpoint, with an override YAML merged over its config (POST /experiments/continue; the
// master's rules are mirrored to disable the button with the reason, and its refusal is shown in
// the dialog). Fork: the experiment's config, edited, becomes a new experiment in the same project
// running the same model definition (POST /experiments with parentId and no files: the master
// gives the fork its parent's files); the page then opens the new experiment.
import yaml from "js-yaml";
import { useRef, useState } from "react";
import { useNavigate } from "react-router-dom";
import * as api from "../../api";
import { useShell } from "../../app";
import { refusal } from "../../components/Field";
import { short } from "../../format";
import type { Experiment } from "../../wire";
import "../../components/debug.css";

/** The experiment as these actions read it. */
export type Forkable = Experiment & {
  archived?: boolean;
  forkedFrom?: number | null;
  config?: { searcher?: { name?: string; max_length?: unknown; metric?: string; smaller_is_better?: boolean } };
};

const CONTINUABLE = ["COMPLETED", "CANCELED", "ERROR"];

/** Why the experiment cannot be continued (the master's rules), or "" when it can. */
export function cannotContinue(e: Forkable): string {
  const searcher = e.searcherType || e.config?.searcher?.name || "";
  if (e.archived) return "It is archived: unarchive it first.";
  if (searcher && searcher !== "single") {
    return `Its searcher is ${searcher}: only a single-trial experiment can be continued (fork it instead).`;
  }
  const state = short(e.state);
  if (!CONTINUABLE.includes(state)) {
    return `It is ${state}: only a finished experiment (completed, canceled or errored) can be continued; wait for it to end, or kill it.`;
  }
  return "";
}

/** The override a Continue starts from: the searcher's length, to raise. */
function overrideDraft(e: Forkable): string {
  const length = e.config?.searcher?.max_length;
  return length === undefined ? "" : yaml.dump({ searcher: { max_length: length } });
}

/** The config a Fork starts from: the submitted config named "Fork of NAME". */
function forkDraft(e: Forkable): string {
  const source = e.originalConfig ?? "";
  try {
    const doc = yaml.load(source);
    if (doc && typeof doc === "object" && !Array.isArray(doc)) {
      return yaml.dump({ ...(doc as Record<string, unknown>), name: `Fork of ${e.name}` }, { lineWidth: 100 });
    }
  } catch { /* shown as submitted: the master says what is wrong with it */ }
  return source;
}

export function ContinueForkActions({ e, after }: { e: Forkable; after: () => void }) {
  const [open, setOpen] = useState<"" | "continue" | "fork">("");
  const reason = cannotContinue(e);
  return (
    <>
      <button type="button" data-action="continue" id="continue-open" disabled={Boolean(reason)}
        title={reason || "Train this experiment's trial further, from its latest checkpoint"}
        aria-describedby={reason ? "continue-reason" : undefined} onClick={() => setOpen("continue")}>
        Continue
      </button>
      <button type="button" data-action="fork" id="fork-open" onClick={() => setOpen("fork")}
        title="Create a new experiment from this one's config and model definition">
        Fork
      </button>
      {reason && <span className="hint" id="continue-reason">Continue: {reason}</span>}
      {open === "continue" && <ContinueDialog e={e} close={() => setOpen("")} after={after} />}
      {open === "fork" && <ForkDialog e={e} close={() => setOpen("")} />}
    </>
  );
}

/** A modal dialog opened as soon as it is mounted; `close` runs when it closes (Escape too). */
function useModal(close: () => void) {
  const node = useRef<HTMLDialogElement | null>(null);
  const ref = (el: HTMLDialogElement | null): void => {
    node.current = el;
    if (el && !el.open) el.showModal();
  };
  return { ref, onClose: close, dismiss: () => node.current?.close() };
}

function ContinueDialog({ e, close, after }: { e: Forkable; close: () => void; after: () => void }) {
  const { toast, handle } = useShell();
  const modal = useModal(close);
  const [text, setText] = useState(() => overrideDraft(e));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (): Promise<void> => {
    setBusy(true);
    setError("");
    try {
      const answer = await api.post<{ experiment: Experiment }>("/experiments/continue", { id: e.id, overrideConfig: text });
      toast(`Continued experiment ${e.id} (now ${short(answer.experiment.state)}): its trial trains on from its latest checkpoint`);
      modal.dismiss();
      after();
    } catch (err) {
      const message = refusal(err, `continue experiment ${e.id}`);
      if (message) setError(message); else handle(err);
    } finally { setBusy(false); }
  };
  return (
    <dialog ref={modal.ref} id="continue-dialog" aria-labelledby="continue-title" onClose={modal.onClose}>
      <form method="dialog" onSubmit={(ev) => { ev.preventDefault(); void submit(); }}>
        <h2 id="continue-title">Continue experiment {e.id}</h2>
        <p>Its trial runs again from its latest checkpoint, with this YAML merged over its config
          (raise <code>searcher.max_length</code> to train longer). Leave it empty to run on with the config unchanged.</p>
        <label htmlFor="continue-config">Override config (YAML)</label>
        <textarea id="continue-config" rows={8} spellCheck={false} value={text} onChange={(ev) => setText(ev.target.value)} />
        <details>
          <summary>The experiment&apos;s config now</summary>
          <pre className="config" id="continue-current">{e.originalConfig ?? ""}</pre>
        </details>
        <p className="error" role="alert" id="continue-error">{error}</p>
        <div className="dialog-actions">
          <button type="button" onClick={modal.dismiss}>Cancel</button>
          <button type="submit" className="primary" disabled={busy}>Continue</button>
        </div>
      </form>
    </dialog>
  );
}

function ForkDialog({ e, close }: { e: Forkable; close: () => void }) {
  const { toast, handle } = useShell();
  const navigate = useNavigate();
  const modal = useModal(close);
  const [text, setText] = useState(() => forkDraft(e));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (): Promise<void> => {
    setBusy(true);
    setError("");
    try {
      const answer = await api.post<{ experiment: Experiment }>("/experiments", {
        config: text, parentId: e.id, projectId: e.projectId, activate: true,
      });
      const made = answer.experiment;
      toast(`Forked experiment ${e.id} as experiment ${made.id}`);
      modal.dismiss();
      navigate(`/experiments/${made.id}`);
    } catch (err) {
      const message = refusal(err, `fork experiment ${e.id}`);
      if (message) setError(message); else handle(err);
    } finally { setBusy(false); }
  };
  return (
    <dialog ref={modal.ref} id="fork-dialog" aria-labelledby="fork-title" onClose={modal.onClose}>
      <form method="dialog" onSubmit={(ev) => { ev.preventDefault(); void submit(); }}>
        <h2 id="fork-title">Fork experiment {e.id}</h2>
        <p>A new experiment with this config runs the same model definition, in the same project.</p>
        <label htmlFor="fork-config">Config (YAML)</label>
        <textarea id="fork-config" rows={16} spellCheck={false} value={text} onChange={(ev) => setText(ev.target.value)} />
        {text.includes("********") && (
          <p className="hint" id="fork-masked">This config holds secrets shown as ******** : put the real values back before creating the experiment.</p>
        )}
        <p className="error" role="alert" id="fork-error">{error}</p>
        <div className="dialog-actions">
          <button type="button" onClick={modal.dismiss}>Cancel</button>
          <button type="submit" className="primary" disabled={busy}>Create experiment</button>
        </div>
      </form>
    </dialog>
  );
}
