// #/experiments/ID[/TAB]: the error banner of a failed run first, summary, actions and editing
// (name, description, labels), then tabs kept in the address: Overview (learning curves and
// the scatter), Trials (sort and filter), Hyperparameters (parallel coordinates, scatter matrix, heat map), Checkpoints, Code, Config, Notes.
// The experiment and its trials are polled here (the tabs read them), both requests at once:
// the page and the Overview (whose chart reads the series) show as soon as the experiment is
// known, without waiting for the trials list, which costs the master far more on a big search.
// Polling stops once the experiment has ended and its trials were read ended too (they change
// no more).
import { useState } from "react";
import { Link, useLocation, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, usePoll } from "../app";
import { Breadcrumbs, experimentCrumbs } from "../components/Breadcrumbs";
import { CheckpointsPanel } from "../components/CheckpointsPanel";
import { Summary, useTitle } from "../components/common";
import { ExperimentCauseBanner } from "../components/RunCause";
import { fmt, isTerminal, short, when } from "../format";
import type { Trial } from "../wire";
import { CodeTab } from "./experiment/CodeTab";
import { ContinueForkActions, type Forkable } from "./experiment/ContinueFork";
import { ConfigTab, EditExperiment, NotesTab } from "./experiment/Details";
import { HyperparametersTab } from "./experiment/HyperparametersTab";
import { Overview } from "./experiment/Overview";
import { TrialsTab } from "./experiment/TrialsTab";
import { ExperimentActions } from "./Experiments";

/** The tabs: [path segment ("" for the overview), label]. */
export const TABS: [string, string][] = [
  ["", "Overview"], ["trials", "Trials"], ["hyperparameters", "Hyperparameters"], ["checkpoints", "Checkpoints"], ["code", "Code"], ["config", "Config"], ["notes", "Notes"],
];

/** The experiment as this page reads it (fields the shared wire type leaves out). */
type Full = Forkable & { description?: string | null; notes?: string };

/** Trials read per poll (the page's tables and charts show at most these). */
const TRIALS_LIMIT = 1000;

/** Whether trials read beside an ended experiment are its final ones: every trial it counts
 * (or the most the page reads) is there and ended. */
function settled(trials: Trial[], e: Full): boolean {
  return trials.length >= Math.min(e.numTrials ?? 0, TRIALS_LIMIT) && trials.every((t) => isTerminal(t.state));
}

export function ExperimentPage() {
  const { id } = useParams();
  return <ExperimentView key={id} id={Number(id)} />;
}

function ExperimentView({ id }: { id: number }) {
  const { tab = "" } = useParams();
  const location = useLocation();
  const [e, setE] = useState<Full | null>(null);
  const [trialList, setTrials] = useState<Trial[] | null>(null);  // null until first read
  const [missing, setMissing] = useState(false);
  const [editing, setEditing] = useState(false);

  const searcherMetric = e ? (e.searcherMetric || e.config?.searcher?.metric || "") : "";
  useTitle(e ? `${e.name} · Stalwart` : `Experiment ${id} · Stalwart`);

  const refresh = usePoll(async (signal) => {
    const readTrials = () => api.get<{ trials?: Trial[] }>(`/experiments/${id}/trials?limit=${TRIALS_LIMIT}`, signal);
    const experiment = api.get<{ experiment: Full }>(`/experiments/${id}`, signal).catch((err: unknown) => {
      if (isApiError(err, 404)) return null;
      throw err;
    });
    const trials = readTrials();
    trials.catch(() => undefined);  // awaited below unless the experiment is missing
    const found = await experiment;
    if (found === null) { setMissing(true); return false; }  // nothing to poll for
    if (signal.aborted) return;
    setE(found.experiment);  // the page and its Overview (the series) go on without the trials
    let read = (await trials).trials ?? [];
    if (signal.aborted) return;
    const ended = isTerminal(found.experiment.state);
    // The trials were read beside the experiment, so maybe just before it ended: when they do
    // not all show ended, read them once more (the experiment had ended by now) and stop.
    if (ended && !settled(read, found.experiment)) {
      read = (await readTrials()).trials ?? [];
      if (signal.aborted) return;
    }
    setTrials(read);
    return !ended;  // an ended experiment changes no more
  }, String(id));

  if (missing) {
    return (
      <>
        <p><Link to="/experiments">← Experiments</Link></p>
        <h1>Experiment {id} not found</h1>
        <p className="empty">There is no experiment {id}, or you may not see it.</p>
      </>
    );
  }
  const trials = trialList ?? [];
  const ended = e ? isTerminal(e.state) : false;
  const errored = trials.filter((t) => short(t.state) === "ERROR").length;  // the banner is read again when it grows
  const known = TABS.some(([path]) => path === tab);
  const facts: [string, string][] = e ? [
    ["State", short(e.state)], ["Searcher", e.searcherType ?? ""],
    ["Metric", `${searcherMetric} (${e.config?.searcher?.smaller_is_better === false ? "larger" : "smaller"} is better)`],
    ["Progress", e.progress == null ? "–" : `${Math.round(e.progress * 100)}%`],
    ["Trials", String(e.numTrials ?? 0)], ["Best", fmt(e.bestTrialSearcherMetric)],
    ["Best trial", e.bestTrialId == null ? "–" : String(e.bestTrialId)],
    ["Labels", (e.labels ?? []).join(", ") || "–"],
    ["User", e.username ?? ""], ["Started", when(e.startTime)], ["Ended", when(e.endTime)],
    ...(e.forkedFrom ? [["Forked from", `experiment ${e.forkedFrom}`] as [string, string]] : []),
  ] : [];
  // The overview's choices (group, metric, hyperparameter) stay in the query across tabs.
  const to = (path: string): string => `/experiments/${id}${path ? `/${path}` : ""}${location.search}`;

  return (
    <>
      <p><Link to="/experiments">← Experiments</Link></p>
      {e && <Breadcrumbs crumbs={experimentCrumbs(e)} />}
      <h1>{e ? `Experiment ${e.id}: ${e.name}` : `Experiment ${id}`}</h1>
      {e && <ExperimentCauseBanner experimentId={id} version={`${e.state} ${errored}`} />}
      {e?.description && <p id="description">{e.description}</p>}
      <Summary facts={facts} />
      {e && (
        <div className="actions experiment-actions">
          <ExperimentActions id={id} state={e.state} after={refresh} />
          <button type="button" id="edit-toggle" aria-expanded={editing} onClick={() => setEditing(!editing)}>Edit</button>
          <ContinueForkActions e={e} after={refresh} />
        </div>
      )}
      {e && editing && (
        <EditExperiment e={e} cancel={() => setEditing(false)}
          done={(saved) => { setE(saved); setEditing(false); refresh(); }} />
      )}

      <nav className="tabs" aria-label="Experiment sections" id="experiment-tabs">
        {TABS.map(([path, label]) => (
          <Link key={label} to={to(path)} aria-current={path === tab ? "page" : undefined} data-tab={path || "overview"}>{label}</Link>
        ))}
      </nav>
      {!known && <p className="empty" id="tab-missing">There is no &ldquo;{tab}&rdquo; section. <Link to={to("")}>Go to the overview</Link></p>}
      {e && tab === "" && <Overview id={id} trials={trials} numTrials={e.numTrials ?? trials.length} searcherMetric={searcherMetric} ended={ended} />}
      {e && trialList === null && (tab === "trials" || tab === "hyperparameters") && <p className="empty" id="trials-loading">Reading the trials…</p>}
      {e && trialList !== null && tab === "trials" && <TrialsTab trials={trials} searcherMetric={searcherMetric} />}
      {e && trialList !== null && tab === "hyperparameters" && (
        <HyperparametersTab trials={trials} searcherMetric={searcherMetric} smallerIsBetter={e.config?.searcher?.smaller_is_better ?? true} config={e.config} />
      )}
      {e && tab === "checkpoints" && (
        <>
          <h2 id="checkpoints-title">Checkpoints</h2>
          <CheckpointsPanel base={`/experiments/${id}`} sortBy="SORT_BY_END_TIME" metric={searcherMetric} withTrial ended={ended} />
        </>
      )}
      {e && tab === "code" && <CodeTab id={id} />}
      {e && tab === "config" && <ConfigTab e={e} />}
      {e && tab === "notes" && <NotesTab e={e} saved={(saved) => { setE(saved); refresh(); }} />}
    </>
  );
}
