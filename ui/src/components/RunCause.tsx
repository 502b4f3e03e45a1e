// The cause of a failed run, shown first on the experiment and trial pages: an error banner
// read from GET /api/v1/ui/trials/ID/cause or /api/v1/ui/experiments/ID/cause (state, exit
// reason and code, the log policies' labels such as "CUDA OOM", the last error lines, a link to
// the logs). Nothing is shown for a run that did not fail.
import { useEffect, useLayoutEffect, useRef, useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { isAbort, isApiError, useShell } from "../app";
import { short } from "../format";
import "./debug.css";

/** One log line of the failed run (the shape of the task logs API). */
export interface CauseLine { id?: string; timestamp?: string; level?: string; log?: string; message?: string; rankId?: number | null; stdtype?: string }

/** `GET /api/v1/ui/trials/{id}/cause`. */
export interface TrialCause {
  trialId: number;
  experimentId: number;
  state: string;
  restarts: number;
  failed: boolean;
  failure: { allocationId?: string; exitCode?: number | null; exitReason?: string | null; agentId?: string | null; endTime?: string | null } | null;
  logPolicyMatched: string | null;
  dontRetry: { pattern: string; line: string }[];
  excludedAgents: string[];
  linesKind: "errors" | "last" | "none";
  lines: CauseLine[];
}

/** `GET /api/v1/ui/experiments/{id}/cause`. */
export interface ExperimentCause { experimentId: number; state: string; trialsErrored: number; firstErroredTrial: TrialCause | null }

/** The labels of a cause: the log policy's label, then each `cancel_retries` pattern that
 * stopped the restarts. */
export function causeLabels(cause: TrialCause): string[] {
  const labels = cause.logPolicyMatched ? [cause.logPolicyMatched] : [];
  for (const d of cause.dontRetry) labels.push(`no retry: ${d.pattern}`);
  for (const a of cause.excludedAgents) labels.push(`agent excluded: ${a}`);
  return labels;
}

/** "it exited with code 3", or the reason with its code when the reason does not name it. */
export function exitText(reason: string | null | undefined, code: number | null | undefined): string {
  const r = reason || "it ended without an exit code";
  if (code == null || r.includes(`code ${code}`) || r.includes(`signal ${-code}`)) return r;
  return `${r} (exit code ${code})`;
}

function lineText(l: CauseLine): string {
  return (l.log ?? l.message ?? "").replace(/\n$/, "");
}

function TrialCauseBody({ cause, logsLink }: { cause: TrialCause; logsLink: React.ReactNode }) {
  const f = cause.failure;
  const labels = causeLabels(cause);
  return (
    <>
      <dl className="cause-facts">
        <dt>State</dt><dd data-field="state">{short(cause.state)}</dd>
        {f && <><dt>Exit</dt><dd data-field="exit">{exitText(f.exitReason, f.exitCode)}</dd></>}
        {cause.restarts > 0 && <><dt>Restarts</dt><dd data-field="restarts">{cause.restarts}</dd></>}
        {f?.agentId && <><dt>Agent</dt><dd data-field="agent">{f.agentId}</dd></>}
      </dl>
      {labels.length > 0 && (
        <ul className="cause-labels" aria-label="Log policies matched">
          {labels.map((l) => <li key={l} className="cause-label">{l}</li>)}
        </ul>
      )}
      {cause.lines.length > 0 && (
        <>
          <p className="cause-lines-title">{cause.linesKind === "errors" ? "Last error lines" : "Last lines"}</p>
          <pre className="cause-lines" id="cause-lines">{cause.lines.map(lineText).join("\n")}</pre>
        </>
      )}
      <p>{logsLink}</p>
    </>
  );
}

/** The error banner of trial `trialId`, read again whenever `version` changes (its state and
 * restarts): nothing unless the trial failed (ERROR) or failed before a restart. `onLogs`
 * shows the trial's logs on the page. */
export function TrialCauseBanner({ trialId, version, onLogs }: { trialId: number; version: string; onLogs: () => void }) {
  const cause = useCause<TrialCause>(`/ui/trials/${trialId}/cause`, version);
  if (!cause || (!cause.failed && !cause.failure)) return null;
  const title = cause.failed ? `Trial ${cause.trialId} failed` : `Trial ${cause.trialId} failed before its restart`;
  return (
    <section id="cause" className={`cause-banner${cause.failed ? "" : " cause-warn"}`} role="alert" aria-labelledby="cause-title">
      <h2 id="cause-title">{title}</h2>
      <TrialCauseBody cause={cause} logsLink={<button type="button" id="cause-logs" onClick={onLogs}>Go to the logs</button>} />
    </section>
  );
}

/** The error banner of experiment `experimentId`: how many trials errored and the cause of the
 * first one, with a link to its page (its logs); nothing when no trial errored and the
 * experiment is not in ERROR. */
export function ExperimentCauseBanner({ experimentId, version }: { experimentId: number; version: string }) {
  const cause = useCause<ExperimentCause>(`/ui/experiments/${experimentId}/cause`, version);
  if (!cause || (cause.trialsErrored === 0 && short(cause.state) !== "ERROR")) return null;
  const first = cause.firstErroredTrial;
  const n = cause.trialsErrored;
  return (
    <section id="cause" className="cause-banner" role="alert" aria-labelledby="cause-title">
      <h2 id="cause-title">
        {short(cause.state) === "ERROR" ? `Experiment ${experimentId} failed` : `Experiment ${experimentId}`}
        {`: ${n} ${n === 1 ? "trial" : "trials"} errored`}
      </h2>
      {first ? (
        <>
          <p>First to fail: <Link to={`/trials/${first.trialId}`}>Trial {first.trialId}</Link></p>
          <TrialCauseBody cause={first} logsLink={<Link id="cause-logs" to={`/trials/${first.trialId}?logs=1`}>Logs of trial {first.trialId}</Link>} />
        </>
      ) : <p>No trial recorded a cause.</p>}
    </section>
  );
}

/** Read `path` once per `version` (errors other than an abort are toasts). The shell's
 * `handle` is read through a ref: it changes with every navigation (react-router's navigate),
 * which must not abort and repeat the read. */
function useCause<T>(path: string, version: string): T | null {
  const { handle } = useShell();
  const handleRef = useRef(handle);
  useLayoutEffect(() => { handleRef.current = handle; });
  const [cause, setCause] = useState<T | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    api.get<T>(path, controller.signal).then(setCause).catch((err: unknown) => {
      if (!isAbort(err) && !isApiError(err, 404)) handleRef.current(err);
    });
    return () => controller.abort();
  }, [path, version]);
  return cause;
}
