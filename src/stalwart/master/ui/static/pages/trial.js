// #/trials/ID: summary, training and validation charts (one chart per metric, a line per group),
// system-metric charts from the profiler's groups, checkpoints, and logs that follow.
import * as api from "../api.js";
import { fmt, lineChart } from "../chart.js";
import { h, main, poll, setText, short } from "../dom.js";
import { logsPanel } from "../logs.js";
import { checkpointsTable } from "./experiment.js";

const TERMINAL = ["COMPLETED", "CANCELED", "ERROR", "DELETED"];
const METRIC_GROUPS = ["training", "validation"];
const SEP = "/";

/** One chart per key of `charts` ({title, lines: [{id, label, xs, ys}]}) inside `box`,
 * reusing the chart elements so that a poll that changes nothing redraws nothing. */
function syncCharts(box, charts, kind) {
  const existing = new Map([...box.children].map((c) => [c.dataset.key, c]));
  for (const [key, chart] of charts) {
    let figure = existing.get(key);
    existing.delete(key);
    if (!figure) {
      const id = `${kind}-${box.childElementCount}`;
      figure = h("figure", { class: `${kind}-chart`, "data-key": key, "aria-labelledby": `${id}-caption` },
        h("figcaption", { id: `${id}-caption` }, chart.title), h("div", { class: "chart-box" }));
      box.append(figure);
    }
    const data = JSON.stringify(chart.lines);
    if (figure.dataset.drawn !== data) {
      figure.dataset.drawn = data;
      lineChart(figure.lastChild, chart.lines, {
        xLabel: "batches", yLabel: chart.title, trials: false, legendLabel: `Lines of ${chart.title}`,
        width: 480, height: 260,
      });
    }
  }
  for (const stale of existing.values()) stale.remove();
}

/** The image pull time of the trial's latest run that pulled ("none" when no run pulled). */
export function imagePull(allocations) {
  const pulled = allocations.filter((a) => typeof a.imagePullSeconds === "number");
  if (!pulled.length) return allocations.length ? "none" : "–";
  const last = pulled[pulled.length - 1].imagePullSeconds;
  return pulled.length > 1 ? `${last.toFixed(1)} s (latest of ${pulled.length} runs)` : `${last.toFixed(1)} s`;
}

export function trialPage(id) {
  const back = h("p", {}, h("a", { href: "#/experiments" }, "← Experiments"));
  const title = h("h1", {}, `Trial ${id}`);
  const summary = h("dl", { class: "summary", id: "summary" });
  const metricsBox = h("div", { id: "metric-charts", class: "charts" });
  const systemBox = h("div", { id: "system-charts", class: "charts" });
  const systemEmpty = h("p", { class: "empty", id: "system-empty" }, "No system metrics: set profiling.enabled: true in the experiment config to record them.");
  const metricsEmpty = h("p", { class: "empty", id: "metrics-empty", hidden: true }, "No metrics reported yet.");
  const ckptBox = h("div");
  const logs = logsPanel(id);
  main.replaceChildren(back, title, summary,
    h("h2", { id: "metrics-title" }, "Training and validation metrics"), metricsEmpty, metricsBox,
    h("h2", { id: "system-title" }, "System metrics"), systemEmpty, systemBox,
    h("h2", { id: "checkpoints-title" }, "Checkpoints"), ckptBox,
    h("h2", { id: "logs-title" }, "Logs"), logs.box);

  let ckpts = null;
  let finished = false;
  let logsStarted = false;
  const refresh = async () => {
    if (finished) return;  // an ended trial changes no more
    const [{ trial: t }, names, ckptData] = await Promise.all([
      api.get(`/trials/${id}`),
      api.get(`/ui/trials/${id}/metric-names`),
      api.get(`/trials/${id}/checkpoints?sortByAttr=SORT_BY_BATCH_NUMBER&orderBy=ORDER_BY_DESC&limit=100`),
    ]);
    const ended = TERMINAL.includes(short(t.state));
    const exp = t.experimentId;
    back.replaceChildren(h("a", { href: `#/experiments/${exp}` }, `← Experiment ${exp}`));
    setText(title, `Trial ${t.id} of experiment ${exp}`);
    document.title = `Trial ${t.id} · Stalwart`;
    const latest = t.latestValidation?.metrics?.avgMetrics || {};
    const task = t.taskId ? await api.get(`/tasks/${encodeURIComponent(t.taskId)}`).catch(() => null) : null;
    const facts = [
      ["State", short(t.state)], ["Batches", String(t.totalBatchesProcessed ?? 0)],
      ["Restarts", String(t.restarts ?? 0)], ["Searcher metric", fmt(t.searcherMetricValue)],
      ...(t.logPolicyMatched ? [["Log policy", t.logPolicyMatched]] : []),
      ["Started", t.startTime ? new Date(t.startTime).toLocaleString() : "–"],
      ["Ended", t.endTime ? new Date(t.endTime).toLocaleString() : "–"],
      ["Image pull", imagePull(task?.task?.allocations || [])],
      ...Object.entries(t.hparams || {}).map(([k, v]) => [k, typeof v === "number" ? fmt(v) : JSON.stringify(v)]),
      ...Object.entries(latest).filter(([, v]) => typeof v === "number").map(([k, v]) => [`Latest validation ${k}`, fmt(v)]),
    ];
    summary.replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v ?? "–")]));

    if (ckpts === null) {
      const { experiment: e } = await api.get(`/experiments/${exp}`);
      const metric = e.searcherMetric || e.config?.searcher?.metric || "";
      ckpts = checkpointsTable("checkpoints", "checkpoints-title", metric, false);
      ckptBox.append(ckpts.box);
    }
    ckpts.refresh(ckptData.checkpoints || []);

    const groups = names.groups || [];
    const fetched = await Promise.all(groups.map((g) => api.get(`/ui/trials/${id}/series?group=${encodeURIComponent(g.group)}&maxPoints=1000`)));
    // Training and validation: one chart per metric name, one line per group.
    const metricCharts = new Map();
    const system = new Map();
    for (const answer of fetched) {
      for (const s of answer.series) {
        const line = { xs: s.batches, ys: s.values, total: s.total };
        if (METRIC_GROUPS.includes(answer.group)) {
          const chart = metricCharts.get(s.metric) || { title: s.metric, lines: [] };
          chart.lines.push({ ...line, id: answer.group, label: `${answer.group} ${s.metric}` });
          metricCharts.set(s.metric, chart);
        } else {
          // Profiler groups nest by agent (and disk or GPU): one chart per leaf metric.
          const parts = (s.path || s.metric.split(SEP)).slice();
          const leaf = parts.pop();
          const key = `${answer.group}${SEP}${leaf}`;
          const chart = system.get(key) || { title: `${answer.group}: ${leaf}`, lines: [] };
          const where = parts.join(" · ") || answer.group;
          chart.lines.push({ ...line, id: where, label: where });
          system.set(key, chart);
        }
      }
    }
    metricsEmpty.hidden = metricCharts.size > 0;
    systemEmpty.hidden = system.size > 0;
    syncCharts(metricsBox, [...metricCharts.entries()].sort(), "metric");
    syncCharts(systemBox, [...system.entries()].sort(), "system");

    if (!logsStarted) { logsStarted = true; logs.start(); }
    await logs.refreshFields();
    if (ended) finished = true;
  };
  poll(refresh);
}
