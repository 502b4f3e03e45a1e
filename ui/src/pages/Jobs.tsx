// #/jobs: the job queue per resource pool (GET /resource-pools, then GET
// /job-queues-v2?resourcePool=NAME: jobs in the order the pool's scheduler takes them). Where
// the pool's scheduler is the priority scheduler, each job the caller may see in full has a
// priority field and Move ahead / Move behind (the job above or below it); under fair share, a
// weight. Changes go as `det job update` sends them: POST /job-queues {updates: [{jobId,
// priority | weight | aheadOf | behindOf}]}; the master refuses what its rules forbid (another
// user's job, a pool whose scheduler does not use the field) and the page shows why.
//
// Paging: each pool's queue is read a page at a time (offset/limit; the master describes only
// the jobs of the page and counts them all in pagination.total), plus the job just above and just
// below the page, so that the first row's Move ahead and the last row's Move behind know their
// neighbour. The page size (`size`: 10, 25, 50 or 100; 50 by default) and each pool's page
// (`page-POOL`, from 1) are kept in the hash.
import { useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { LabelledSelect, Table, useTitle } from "../components/common";
import { refusal } from "../components/Field";
import { short, when } from "../format";

interface Pool { name: string; schedulerType?: string }
interface JobFields {
  jobId: string; type?: string; resourcePool?: string; priority?: number; weight?: number;
  requestedSlots?: number; allocatedSlots?: number; summary?: { state?: string; jobsAhead?: number };
  entityId?: string; name?: string; submissionTime?: string; username?: string;
}
interface Job { full?: JobFields; limited?: JobFields }
/** One pool's page: its jobs, the first one's place (0-based), the whole queue's length, and the
 * job ids just above and below the page (for Move ahead/behind at its edges). */
interface Queue { pool: Pool; jobs: Job[]; start: number; total: number; before?: string; after?: string }

const SIZES = [10, 25, 50, 100];
const DEFAULT_SIZE = 50;
const idOf = (j: Job | undefined): string | undefined => (j?.full ?? j?.limited)?.jobId;

/** Read page `page` (0-based) of `pool`'s queue of `size` jobs, with one job either side. */
async function readPage(pool: Pool, page: number, size: number, signal: AbortSignal): Promise<Queue> {
  const start = page * size;
  const offset = Math.max(0, start - 1);
  const query = `resourcePool=${encodeURIComponent(pool.name)}&offset=${offset}&limit=${size + 1 + (start - offset)}`;
  const answer = await api.get<{ jobs?: Job[]; pagination?: { total?: number } }>(`/job-queues-v2?${query}`, signal);
  const got = answer.jobs ?? [];
  const skip = start - offset;
  return {
    pool, start, total: answer.pagination?.total ?? got.length,
    jobs: got.slice(skip, skip + size), before: skip ? idOf(got[0]) : undefined, after: idOf(got[skip + size]),
  };
}

type Update = { priority: number } | { weight: number } | { aheadOf: string } | { behindOf: string };

/** A job type without its prefix: TYPE_EXPERIMENT -> EXPERIMENT. */
const typeOf = (t: string | undefined): string => (t ?? "").replace(/^TYPE_/, "");

const jobLabel = (j: JobFields): string => `${typeOf(j.type).toLowerCase() || "job"} ${j.entityId ?? j.jobId}`;

function JobName({ job }: { job: JobFields }) {
  if (typeOf(job.type) === "EXPERIMENT" && job.entityId) return <Link to={`/experiments/${job.entityId}`}>{job.name ?? `Experiment ${job.entityId}`}</Link>;
  return <>{job.name ?? job.entityId ?? ""}</>;
}

function PoolQueue({ queue, size, go, edits, setEdit, update }: {
  queue: Queue; size: number; go: (page: number) => void; edits: Record<string, string>; setEdit: (id: string, value: string) => void;
  update: (job: JobFields, change: Update, what: string) => Promise<void>;
}) {
  const page = Math.floor(queue.start / size);
  const pages = Math.max(1, Math.ceil(queue.total / size));
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
          const aboveId = i === 0 ? queue.before : idOf(queue.jobs[i - 1]);
          const belowId = i === queue.jobs.length - 1 ? queue.after : idOf(queue.jobs[i + 1]);
          const label = full ? jobLabel(job) : `job ${job.jobId}`;
          const edited = edits[job.jobId] ?? String(value ?? "");
          return (
            <tr key={job.jobId} data-key={job.jobId}>
              <td className="num">{queue.start + i + 1}</td>
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
      {queue.total === 0 && <p className="empty">No jobs in this pool: nothing is running or waiting.</p>}
      {queue.total > 0 && (
        <nav className="pager" aria-label={`Pages of pool ${queue.pool.name}`} id={`jobs-pager-${queue.pool.name}`}>
          <button type="button" disabled={page === 0} aria-label={`Previous page of pool ${queue.pool.name}`} onClick={() => go(page - 1)}>Previous</button>
          <span className="jobs-range" aria-live="polite">
            {queue.jobs.length === 0 ? `none of ${queue.total} jobs` : `${queue.start + 1}–${queue.start + queue.jobs.length} of ${queue.total} jobs`}{pages > 1 ? ` (page ${page + 1} of ${pages})` : ""}
          </span>
          <button type="button" disabled={page + 1 >= pages} aria-label={`Next page of pool ${queue.pool.name}`} onClick={() => go(page + 1)}>Next</button>
        </nav>
      )}
    </section>
  );
}

export function JobsPage() {
  useTitle("Job queue · Stalwart");
  const { toast, handle } = useShell();
  const [queues, setQueues] = useState<Queue[] | null>(null);
  const [edits, setEdits] = useState<Record<string, string>>({});
  const [error, setError] = useState("");
  const [query, setQuery] = useHashQuery();
  const asked = Number(query.get("size"));
  const size = SIZES.includes(asked) ? asked : DEFAULT_SIZE;
  const pageOf = (pool: string): number => Math.max(0, (Number(query.get(`page-${pool}`)) || 1) - 1);
  const write = (changes: Record<string, string>): void => {
    const next: Record<string, string> = Object.fromEntries(query.entries());
    setQuery({ ...next, ...changes });
  };

  const refresh = usePoll(async (signal) => {
    const pools = (await api.get<{ resourcePools?: Pool[] }>("/resource-pools", signal)).resourcePools ?? [];
    const found = await Promise.all(pools.map(async (pool) => {
      const queue = await readPage(pool, pageOf(pool.name), size, signal);
      // a page past the end (the queue got shorter): show its last page
      const last = Math.max(0, Math.ceil(queue.total / size) - 1);
      return queue.jobs.length === 0 && queue.start > 0 ? readPage(pool, last, size, signal) : queue;
    }));
    if (!signal.aborted) setQueues(found);
  }, `jobs ${query.toString()}`);

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
      <form className="filters" aria-label="Job queue paging" onSubmit={(e) => e.preventDefault()}>
        <LabelledSelect id="jobs-size" label="Jobs per page" value={String(size)} options={SIZES.map((n): [string, string] => [String(n), String(n)])}
          onChange={(v) => {
            // a new size starts every pool over at its first page
            const kept = Object.fromEntries([...query.entries()].filter(([k]) => !k.startsWith("page-")));
            setQuery({ ...kept, size: v === String(DEFAULT_SIZE) ? "" : v });
          }} />
      </form>
      <p className="error" role="alert" id="jobs-error">{error}</p>
      {(queues ?? []).map((q) => (
        <PoolQueue key={q.pool.name} queue={q} size={size} go={(p) => write({ [`page-${q.pool.name}`]: p > 0 ? String(p + 1) : "" })} edits={edits} update={update}
          setEdit={(id, value) => setEdits((e) => ({ ...e, [id]: value }))} />
      ))}
      {queues && queues.length === 0 && <p className="empty">No resource pools: start an agent.</p>}
    </>
  );
}
