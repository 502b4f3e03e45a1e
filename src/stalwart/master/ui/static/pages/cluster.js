// #/cluster: resource pools, then the agents and their slots with what runs on each (or the
// Slurm partitions / PBS queues when the master uses a batch system), and the job queue by priority.
import * as api from "../api.js";
import { h, main, poll, setText, short, syncRows, table, when } from "../dom.js";

/** The batch systems whose pools are the system's own (by the pools' scheduler type). */
const BATCH = {
  SCHEDULER_TYPE_SLURM: { system: "Slurm", pools: "Slurm partitions", pool: "Partition", what: "a Slurm partition" },
  SCHEDULER_TYPE_PBS: { system: "PBS", pools: "PBS queues", pool: "Queue", what: "a PBS queue" },
};
const device = (type) => (type || "").replace(/^TYPE_/, "");

/** Live allocations by container id, and the queue: priority first (a lower number runs
 * first, as the priority scheduler does), then the time each was requested. */
export function queueOf(tasks) {
  const all = Object.values(tasks.allocationIdToSummary || {});
  const byContainer = new Map();
  for (const a of all) for (const r of a.resources || []) byContainer.set(r.containerId, a);
  const queue = all.slice().sort((a, b) => (a.priority ?? 42) - (b.priority ?? 42)
    || String(a.registeredTime || "").localeCompare(String(b.registeredTime || ""))
    || a.allocationId.localeCompare(b.allocationId));
  return { byContainer, queue };
}

/** The task's name; a trial's ("Trial 5 (Experiment 2)") links to the trial page. */
function taskLabel(a) {
  const name = a.name || a.taskId;
  const trial = name.match(/^Trial (\d+)\b/);
  return trial ? h("a", { href: `#/trials/${trial[1]}` }, name) : h("span", {}, name);
}

export function clusterPage() {
  document.title = "Cluster · Stalwart";
  const pools = table("pools", "pools-title", ["Pool", "Scheduler", "Slot type", "Agents", "Slots used", "Slots available"]);
  const agents = table("agents", "agents-title", ["Agent", "Pool", "Enabled", "Slots", "Registered"]);
  const slots = table("slots", "slots-title", ["Agent", "Slot", "Device", "Enabled", "Running"]);
  const queue = table("queue", "queue-title", ["#", "Task", "Priority", "Pool", "Slots", "State", "Requested"]);
  const agentsTitle = h("h2", { id: "agents-title" }, "Agents");
  const agentsBox = h("div", { id: "agents-section" }, agentsTitle, h("div", { class: "scroll" }, agents.table),
    h("h2", { id: "slots-title" }, "Slots"), h("div", { class: "scroll" }, slots.table));
  const slurmNote = h("p", { id: "slurm-note", class: "muted", hidden: true });
  const noAgents = h("p", { class: "empty", hidden: true }, "No agents are connected: start one with `stalwart agent --master URL`.");
  const emptyQueue = h("p", { class: "empty", hidden: true }, "Nothing is queued or running.");
  const poolsTitle = h("h2", { id: "pools-title" }, "Resource pools");
  main.replaceChildren(h("h1", {}, "Cluster"), poolsTitle, h("div", { class: "scroll" }, pools.table), slurmNote,
    agentsBox, noAgents, h("h2", { id: "queue-title" }, "Job queue"),
    h("p", { class: "muted" }, "Live allocations by priority (a lower number runs first), then by when they were requested."),
    h("div", { class: "scroll" }, queue.table), emptyQueue);

  const refresh = async () => {
    const [poolData, agentData, tasks] = await Promise.all([
      api.get("/resource-pools"), api.get("/agents"), api.get("/tasks"),
    ]);
    const poolList = poolData.resourcePools || [];
    const batch = BATCH[poolList.find((p) => BATCH[p.schedulerType])?.schedulerType];
    const slurm = Boolean(batch);  // pools are a batch system's: its nodes, not agents
    setText(poolsTitle, batch ? batch.pools : "Resource pools");
    const heads = pools.table.tHead.rows[0].cells;
    setText(heads[0], batch ? batch.pool : "Pool");
    setText(heads[3], batch ? "Nodes" : "Agents");
    slurmNote.hidden = !batch;
    if (batch) setText(slurmNote, `This master runs its trials as ${batch.system} batch jobs: each resource pool above is ${batch.what}, and ${batch.system} places the jobs on its nodes.`);
    syncRows(pools.tbody, poolList, (p) => p.name, () => h("tr", {}, ...Array.from({ length: 6 }, () => h("td"))), (row, p) => {
      const c = row.cells;
      setText(c[0], p.name + (p.defaultComputePool ? " (default)" : ""));
      setText(c[1], (p.schedulerType || "").replace(/^SCHEDULER_TYPE_/, ""));
      setText(c[2], device(p.slotType));
      c[3].className = "num"; setText(c[3], String(p.numAgents ?? 0));
      c[4].className = "num"; setText(c[4], String(p.slotsUsed ?? 0));
      c[5].className = "num"; setText(c[5], String(p.slotsAvailable ?? 0));
    });

    const { byContainer, queue: q } = queueOf(tasks);
    const agentList = (agentData.agents || []).slice().sort((a, b) => a.id.localeCompare(b.id));
    agentsBox.hidden = slurm && agentList.length === 0;
    noAgents.hidden = slurm || agentList.length > 0;
    syncRows(agents.tbody, agentList, (a) => a.id, () => h("tr", {}, ...Array.from({ length: 5 }, () => h("td"))), (row, a) => {
      const c = row.cells;
      const all = Object.values(a.slots || {});
      const busy = all.filter((s) => s.container).length;
      setText(c[0], a.id);
      setText(c[1], (a.resourcePools || []).join(", "));
      setText(c[2], a.enabled === false ? "no" : a.draining ? "draining" : "yes");
      setText(c[3], `${busy} of ${all.length} in use`);
      setText(c[4], when(a.registeredTime));
    });
    const slotRows = agentList.flatMap((a) => Object.entries(a.slots || {}).sort(([x], [y]) => x.localeCompare(y, undefined, { numeric: true }))
      .map(([sid, s]) => ({ agent: a.id, sid, s })));
    syncRows(slots.tbody, slotRows, (r) => `${r.agent}/${r.sid}`, () => h("tr", {}, ...Array.from({ length: 5 }, () => h("td"))), (row, r) => {
      const c = row.cells;
      setText(c[0], r.agent);
      setText(c[1], r.sid);
      setText(c[2], `${device(r.s.device?.type)} ${r.s.device?.brand || ""}`.trim());
      setText(c[3], r.s.enabled === false ? "no" : r.s.draining ? "draining" : "yes");
      const running = r.s.container ? byContainer.get(r.s.container.id) : null;
      c[4].replaceChildren(running ? taskLabel(running) : r.s.container ? short(r.s.container.state) : "free");
      c[4].className = running || r.s.container ? "busy" : "muted";
    });
    emptyQueue.hidden = q.length > 0;
    syncRows(queue.tbody, q, (a) => a.allocationId, () => h("tr", {}, ...Array.from({ length: 7 }, () => h("td"))), (row, a) => {
      const c = row.cells;
      c[0].className = "num"; setText(c[0], String(q.indexOf(a) + 1));
      c[1].replaceChildren(taskLabel(a));
      c[2].className = "num"; setText(c[2], String(a.priority ?? "–"));
      setText(c[3], a.resourcePool || "");
      c[4].className = "num"; setText(c[4], String(a.slotsNeeded ?? 0));
      setText(c[5], a.resources ? "Running" : "Queued");
      setText(c[6], when(a.registeredTime));
    });
  };
  poll(refresh);
}
