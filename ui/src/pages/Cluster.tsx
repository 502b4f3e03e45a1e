// #/cluster: resource pools, then the agents and their slots with what runs on each (or the
// Slurm partitions / PBS queues when the master uses a batch system), and the job queue by
// priority. Usage over time (slot-hours per day) sits under the pools (components/UsageChart).
import { useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { usePoll } from "../app";
import { Table, useTitle } from "../components/common";
import { UsageChart } from "../components/UsageChart";
import { short, when } from "../format";

/** The batch systems whose pools are the system's own (by the pools' scheduler type). */
const BATCH: Record<string, { system: string; pools: string; pool: string; what: string }> = {
  SCHEDULER_TYPE_SLURM: { system: "Slurm", pools: "Slurm partitions", pool: "Partition", what: "a Slurm partition" },
  SCHEDULER_TYPE_PBS: { system: "PBS", pools: "PBS queues", pool: "Queue", what: "a PBS queue" },
};
const device = (type: string | undefined): string => (type ?? "").replace(/^TYPE_/, "");

/** A pool's slots for people: "4 of 4 slots busy" (never two counts that could read as 8). */
export const slotsBusy = (used: number, total: number): string => `${used} of ${total} ${total === 1 ? "slot" : "slots"} busy`;

interface Pool { name: string; schedulerType?: string; slotType?: string; numAgents?: number; slotsUsed?: number; slotsAvailable?: number; defaultComputePool?: boolean }
interface Slot { enabled?: boolean; draining?: boolean; device?: { type?: string; brand?: string }; container?: { id: string; state?: string } | null }
interface Agent { id: string; resourcePools?: string[]; enabled?: boolean; draining?: boolean; registeredTime?: string; slots?: Record<string, Slot> }
export interface Allocation {
  allocationId: string; taskId?: string; name?: string; priority?: number; registeredTime?: string;
  resourcePool?: string; slotsNeeded?: number; resources?: { containerId?: string }[] | null;
}

/** Live allocations by container id, and the queue: priority first (a lower number runs
 * first, as the priority scheduler does), then the time each was requested. */
export function queueOf(tasks: { allocationIdToSummary?: Record<string, Allocation> }): { byContainer: Map<string, Allocation>; queue: Allocation[] } {
  const all = Object.values(tasks.allocationIdToSummary ?? {});
  const byContainer = new Map<string, Allocation>();
  for (const a of all) for (const r of a.resources ?? []) if (r.containerId) byContainer.set(r.containerId, a);
  const queue = all.slice().sort((a, b) => (a.priority ?? 42) - (b.priority ?? 42)
    || String(a.registeredTime ?? "").localeCompare(String(b.registeredTime ?? ""))
    || a.allocationId.localeCompare(b.allocationId));
  return { byContainer, queue };
}

/** The task's name; a trial's ("Trial 5 (Experiment 2)") links to the trial page. */
function TaskLabel({ a }: { a: Allocation }) {
  const name = a.name ?? a.taskId ?? a.allocationId;
  const trial = /^Trial (\d+)\b/.exec(name);
  return trial ? <Link to={`/trials/${trial[1]}`}>{name}</Link> : <span>{name}</span>;
}

interface Loaded { pools: Pool[]; agents: Agent[]; byContainer: Map<string, Allocation>; queue: Allocation[] }

export function ClusterPage() {
  useTitle("Cluster · Stalwart");
  const [data, setData] = useState<Loaded | null>(null);
  usePoll(async (signal) => {
    const [poolData, agentData, tasks] = await Promise.all([
      api.get<{ resourcePools?: Pool[] }>("/resource-pools", signal),
      api.get<{ agents?: Agent[] }>("/agents", signal),
      api.get<{ allocationIdToSummary?: Record<string, Allocation> }>("/tasks", signal),
    ]);
    if (signal.aborted) return;
    const agents = (agentData.agents ?? []).slice().sort((a, b) => a.id.localeCompare(b.id));
    setData({ pools: poolData.resourcePools ?? [], agents, ...queueOf(tasks) });
  }, "cluster");

  const pools = data?.pools ?? [];
  const batchType = pools.find((p) => p.schedulerType && BATCH[p.schedulerType])?.schedulerType;
  const batch = batchType ? BATCH[batchType] : undefined;
  const agents = data?.agents ?? [];
  const queue = data?.queue ?? [];
  const slots = agents.flatMap((a) => Object.entries(a.slots ?? {})
    .sort(([x], [y]) => x.localeCompare(y, undefined, { numeric: true }))
    .map(([sid, s]) => ({ agent: a.id, sid, s })));
  const yes = (x: { enabled?: boolean; draining?: boolean }): string => (x.enabled === false ? "no" : x.draining ? "draining" : "yes");
  return (
    <>
      <h1>Cluster</h1>
      <h2 id="pools-title">{batch ? batch.pools : "Resource pools"}</h2>
      <Table id="pools" labelledBy="pools-title"
        columns={[batch ? batch.pool : "Pool", "Scheduler", "Slot type", batch ? "Nodes" : "Agents", "Slots busy"]}>
        {pools.map((p) => (
          <tr key={p.name} data-key={p.name}>
            <td>{p.name + (p.defaultComputePool ? " (default)" : "")}</td>
            <td>{(p.schedulerType ?? "").replace(/^SCHEDULER_TYPE_/, "")}</td>
            <td>{device(p.slotType)}</td>
            <td className="num">{p.numAgents ?? 0}</td>
            <td className="num" data-field="slots">{slotsBusy(p.slotsUsed ?? 0, p.slotsAvailable ?? 0)}</td>
          </tr>
        ))}
      </Table>
      <p id="slurm-note" className="muted" hidden={!batch}>
        {batch ? `This master runs its trials as ${batch.system} batch jobs: each resource pool above is ${batch.what}, and ${batch.system} places the jobs on its nodes.` : ""}
      </p>
      <h2 id="usage-title">Usage over time</h2>
      <p className="muted">Slot-hours allocated per day (UTC) over the last 30 days, every pool together.</p>
      <UsageChart days={30} />
      <div id="agents-section" hidden={Boolean(batch) && agents.length === 0}>
        <h2 id="agents-title">Agents</h2>
        <Table id="agents" labelledBy="agents-title" columns={["Agent", "Pool", "Enabled", "Slots", "Registered"]}>
          {agents.map((a) => {
            const all = Object.values(a.slots ?? {});
            const busy = all.filter((s) => s.container).length;
            return (
              <tr key={a.id} data-key={a.id}>
                <td>{a.id}</td><td>{(a.resourcePools ?? []).join(", ")}</td><td>{yes(a)}</td>
                <td>{`${busy} of ${all.length} in use`}</td><td>{when(a.registeredTime)}</td>
              </tr>
            );
          })}
        </Table>
        <h2 id="slots-title">Slots</h2>
        <Table id="slots" labelledBy="slots-title" columns={["Agent", "Slot", "Device", "Enabled", "Running"]}>
          {slots.map((r) => {
            const running = r.s.container ? data?.byContainer.get(r.s.container.id) : undefined;
            return (
              <tr key={`${r.agent}/${r.sid}`} data-key={`${r.agent}/${r.sid}`}>
                <td>{r.agent}</td><td>{r.sid}</td>
                <td>{`${device(r.s.device?.type)} ${r.s.device?.brand ?? ""}`.trim()}</td>
                <td>{yes(r.s)}</td>
                <td className={running || r.s.container ? "busy" : "muted"}>
                  {running ? <TaskLabel a={running} /> : r.s.container ? short(r.s.container.state) : "free"}
                </td>
              </tr>
            );
          })}
        </Table>
      </div>
      {data && !batch && agents.length === 0 && <p className="empty">No agents are connected: start one with `stalwart agent --master URL`.</p>}
      <h2 id="queue-title">Job queue</h2>
      <p className="muted">Live allocations by priority (a lower number runs first), then by when they were requested.</p>
      <Table id="queue" labelledBy="queue-title" columns={["#", "Task", "Priority", "Pool", "Slots", "State", "Requested"]}>
        {queue.map((a, i) => (
          <tr key={a.allocationId} data-key={a.allocationId}>
            <td className="num">{i + 1}</td><td><TaskLabel a={a} /></td>
            <td className="num">{a.priority ?? "–"}</td><td>{a.resourcePool ?? ""}</td>
            <td className="num">{a.slotsNeeded ?? 0}</td><td>{a.resources ? "Running" : "Queued"}</td>
            <td>{when(a.registeredTime)}</td>
          </tr>
        ))}
      </Table>
      {data && queue.length === 0 && <p className="empty">Nothing is queued or running.</p>}
    </>
  );
}
