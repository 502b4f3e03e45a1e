// #/jobs: the job queue per resource pool (GET /resource-pools, then GET
// /job-queues-v2?resourcePool=NAME: jobs in the order the pool's scheduler takes them). Where
// the pool's scheduler is the priority scheduler, each job the caller may see in full has a
// priority field and Move ahead / Move behind (the job above or below it); under fair share, a
// weight. Changes go as `det job update` sends them: POST /job-queues {updates: [{jobId,
// priority | weight | aheadOf | behindOf}]}; the master refuses what its rules forbid (another
// user's job, a pool whose scheduler does not use the field) and the page shows why.
import { useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { usePoll, useShell } from "../app";
import { Table, useTitle } from "../components/common";
import { refusal } from "../components/Field";
import { short, when } from "../format";

interface Pool { name: string; schedulerType?: string }
interface JobFields {
  jobId: string; type?: string; resourcePool?: string; priority?: number; weight?: number;
  requestedSlots?: number; allocatedSlots?: number; summary?: { state?: string; jobsAhead?: number };
  entityId?: string; name?: string; submissionTime?: string; username?: string;
}
interface Job { full?: JobFields; limited?: JobFields }
interface Queue { pool: Pool; jobs: Job[] }

type Update = { priority: number } | { weight: number } | { aheadOf: string } | { behindOf: string };

/** A job type without its prefix: TYPE_EXPERIMENT -> EXPERIMENT. */
const typeOf = (t: string | undefined): string => (t ?? "").replace(/^TYPE_/, "");

const jobLabel = (j: JobFields): string => `${typeOf(j.type).toLowerCase() || "job"} ${j.entityId ?? j.jobId}`;

function JobName({ job }: { job: JobFields }) {
  if (typeOf(job.type) === "EXPERIMENT" && job.entityId) return <Link to={`/experiments/${job.entityId}`}>{job.name ?? `Experiment ${job.entityId}`}</Link>;
  return <>{job.name ?? job.entityId ?? ""}</>;
}

function PoolQueue({ queue, edits, setEdit, update }: {
  queue: Queue; edits: Record<string, string>; setEdit: (id: string, value: string) => void;
  update: (job: JobFields, change: Update, what: string) => Promise<void>;
}) {
  const scheduler = (queue.pool.schedulerType ?? "").replace(/^SCHEDULER_TYPE_/, "");
  const priority = scheduler === "PRIORITY";
  const fair = scheduler === "FAIR_SHARE";
  const field = priority ? "Priority" : fair ? "Weight" : "Priority";
  const titleId = `queue-title-${queue.pool.name}`;
  return (
    <section aria-labelledby={titleId} data-pool={queue.pool.name}>
      <h2 id={titleId}>Pool {queue.pool.name}</h2>
      <p className="muted">Scheduler: {scheduler.toLowerCase().replace("_", " ") || "unknown"}. {priority ? "A smaller priority number runs first." : ""}</p>
      <Table id={`jobs-${queue.pool.name}`} labelledBy={titleId} columns={["#", "Type", "Name", "State", field, "Slots", "User", "Submitted", "Actions"]}>
        {queue.jobs.map((j, i) => {
          const job = j.full ?? j.limited;
          if (!job) return null;
          const full = Boolean(j.full);
          const value = priority ? job.priority : job.weight;
          const above = queue.jobs[i - 1]; const below = queue.jobs[i + 1];
          const aboveId = (above?.full ?? above?.limited)?.jobId; const belowId = (below?.full ?? below?.limited)?.jobId;
          const label = full ? jobLabel(job) : `job ${job.jobId}`;
          const edited = edits[job.jobId] ?? String(value ?? "");
          return (
            <tr key={job.jobId} data-key={job.jobId}>
              <td className="num">{i + 1}</td>
              <td>{typeOf(job.type)}</td>
              <td>{full ? <JobName job={job} /> : <span className="muted">(not yours to see)</span>}</td>
              <td>{short(job.summary?.state)}</td>
              <td className="num">
                {full && (priority || fair)
                  ? <form className="cell-form" aria-label={`${field} of ${label}`} onSubmit={(e) => {
                      e.preventDefault();
                      const n = Number(edited);
                      void update(job, priority ? { priority: n } : { weight: n }, `set the ${field.toLowerCase()} of ${label}`);
                    }}>
                      <input type="text" inputMode="numeric" size={4} aria-label={`${field} of ${label}`} value={edited}
                        onChange={(e) => setEdit(job.jobId, e.target.value)} />
                      <button type="submit" aria-label={`Set the ${field.toLowerCase()} of ${label}`}>Set</button>
                    </form>
                  : String(value ?? "")}
              </td>
              <td className="num">{`${job.allocatedSlots ?? 0}/${job.requestedSlots ?? 0}`}</td>
              <td>{job.username ?? ""}</td>
              <td>{when(job.submissionTime)}</td>
              <td>
                {full && priority && (
                  <div className="actions">
                    <button type="button" data-action="ahead" aria-label={`Move ${label} ahead`} disabled={!aboveId}
                      onClick={() => aboveId && void update(job, { aheadOf: aboveId }, `move ${label} ahead`)}>Move ahead</button>
                    <button type="button" data-action="behind" aria-label={`Move ${label} behind`} disabled={!belowId}
                      onClick={() => belowId && void update(job, { behindOf: belowId }, `move ${label} behind`)}>Move behind</button>
                  </div>
                )}
              </td>
            </tr>
          );
        })}
      </Table>
      {queue.jobs.length === 0 && <p className="empty">No jobs in this pool: nothing is running or waiting.</p>}
    </section>
  );
}

export function JobsPage() {
  useTitle("Job queue · Stalwart");
  const { toast, handle } = useShell();
  const [queues, setQueues] = useState<Queue[] | null>(null);
  const [edits, setEdits] = useState<Record<string, string>>({});
  const [error, setError] = useState("");

  const refresh = usePoll(async (signal) => {
    const pools = (await api.get<{ resourcePools?: Pool[] }>("/resource-pools", signal)).resourcePools ?? [];
    const found = await Promise.all(pools.map(async (pool) => {
      const answer = await api.get<{ jobs?: Job[] }>(`/job-queues-v2?resourcePool=${encodeURIComponent(pool.name)}`, signal);
      return { pool, jobs: answer.jobs ?? [] };
    }));
    if (!signal.aborted) setQueues(found);
  }, "jobs");

  const update = async (job: JobFields, change: Update, what: string): Promise<void> => {
    setError("");
    try {
      await api.post("/job-queues", { updates: [{ jobId: job.jobId, ...change }] });
      toast(`Done: ${what}`);
      setEdits((e) => { const rest = { ...e }; delete rest[job.jobId]; return rest; });
      refresh();
    } catch (err) {
      const message = refusal(err, what);
      if (message) setError(message); else handle(err);
    }
  };

  return (
    <>
      <h1 id="jobs-title">Job queue</h1>
      <p className="muted">Experiments and tasks holding or waiting for slots, per pool, in the order the pool's scheduler takes them.</p>
      <p className="error" role="alert" id="jobs-error">{error}</p>
      {(queues ?? []).map((q) => (
        <PoolQueue key={q.pool.name} queue={q} edits={edits} update={update}
          setEdit={(id, value) => setEdits((e) => ({ ...e, [id]: value }))} />
      ))}
      {queues && queues.length === 0 && <p className="empty">No resource pools: start an agent.</p>}
    </>
  );
}
