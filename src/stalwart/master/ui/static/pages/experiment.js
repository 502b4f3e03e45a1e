// #/experiments/ID: summary and actions, learning curves of any metric (group and metric picked,
// kept in the hash), a hyperparameter-vs-metric scatter, the trials table, checkpoints, YAML.
import * as api from "../api.js";
import { fmt, lineChart, scatterChart } from "../chart.js";
import {
  bytes, h, hashQuery, labelledSelect, main, poll, setHashQuery, setOptions, setText, short,
  stateCell, syncRows, table, when,
} from "../dom.js";
import { experimentActions } from "./experiments.js";

/** Points per trial asked of the server: fewer per line when many trials share a chart. */
export const pointsPerTrial = (trials) => Math.max(100, Math.min(1000, Math.floor(20000 / Math.max(trials, 1))));

/** The checkpoints table (experiment and trial pages); `refresh(list)` fills it. */
export function checkpointsTable(id, labelledBy, metric, withTrial) {
  const cols = ["UUID", ...(withTrial ? ["Trial"] : []), "Batches", "State", "Size", "Reported", metric ? `Validation ${metric}` : "Validation"];
  const { table: t, tbody } = table(id, labelledBy, cols);
  const empty = h("p", { class: "empty", hidden: true }, "No checkpoints yet.");
  const refresh = (list) => {
    empty.hidden = list.length > 0;
    syncRows(tbody, list, (c) => c.uuid, () => h("tr", {}, ...cols.map(() => h("td"))), (row, c) => {
      const cells = [...row.cells];
      let i = 0;
      setText(cells[i], c.uuid.slice(0, 8)); cells[i].title = c.uuid; cells[i++].className = "mono";
      if (withTrial) {
        const tid = c.training?.trialId;
        if (!cells[i].firstChild && tid != null) cells[i].append(h("a", { href: `#/trials/${tid}` }, String(tid)));
        i += 1;
      }
      const size = Object.values(c.resources || {}).reduce((a, b) => a + Number(b || 0), 0);
      cells[i].className = "num"; setText(cells[i++], String(c.metadata?.steps_completed ?? "–"));
      stateCell(cells[i++], c.state);
      cells[i].className = "num"; setText(cells[i++], bytes(size));
      setText(cells[i++], when(c.reportTime));
      const v = c.training?.validationMetrics?.avgMetrics?.[metric];
      cells[i].className = "num"; setText(cells[i], typeof v === "number" ? fmt(v) : "–");
    });
  };
  return { box: h("div", { class: "scroll" }, t, empty), refresh };
}

export function experimentPage(id) {
  const query = hashQuery();
  const title = h("h1", {}, `Experiment ${id}`);
  const summary = h("dl", { class: "summary", id: "summary" });
  const actions = experimentActions(id, () => refresh());
  const group = labelledSelect("curve-group", "Metrics", [["validation", "validation"], ["training", "training"]], query.get("group") || "validation");
  const metricSel = labelledSelect("curve-metric", "Metric", [], "");
  const logBox = h("input", { type: "checkbox", id: "log-scale" });
  const logLabel = h("label", { for: "log-scale", class: "field" }, logBox, " Log scale");
  const chartBox = h("div", { id: "chart" });
  const chartTitle = h("h2", { id: "chart-title" }, "Learning curves");
  const hpSel = labelledSelect("scatter-hp", "Hyperparameter", [], query.get("hp") || "");
  const logX = h("input", { type: "checkbox", id: "scatter-log" });
  const scatterTitle = h("h2", { id: "scatter-title" }, "Hyperparameters against the metric");
  const scatterBox = h("div", { id: "scatter" });
  const trialsHead = h("tr");
  const trialsBody = h("tbody");
  const trialsTable = h("table", { id: "trials", "aria-labelledby": "trials-title" }, h("thead", {}, trialsHead), trialsBody);
  const config = h("pre", { class: "config", id: "config" });
  let searcherMetric = "";
  let ckpts = null;
  const ckptBox = h("div");
  main.replaceChildren(
    h("p", {}, h("a", { href: "#/experiments" }, "← Experiments")),
    title, summary, actions.box,
    chartTitle, h("div", { class: "controls" }, group.box, metricSel.box, logLabel), chartBox,
    scatterTitle, h("p", { class: "muted" }, "Each point is a trial: its hyperparameter against the latest value of the metric picked above."),
    h("div", { class: "controls" }, hpSel.box, h("label", { for: "scatter-log", class: "field" }, logX, " Log scale (hyperparameter)")), scatterBox,
    h("h2", { id: "trials-title" }, "Trials"), h("div", { class: "scroll" }, trialsTable),
    h("h2", { id: "checkpoints-title" }, "Checkpoints"), ckptBox,
    h("details", {}, h("summary", {}, "Config (YAML as submitted)"), config));

  let hpKeys = null;
  let trials = [];
  let lastSeries = "";
  let lastData = null;
  const picked = () => ({ group: group.select.value, metric: metricSel.select.value || searcherMetric });
  const draw = () => {
    if (lastData === null) return;
    const { group: g, metric } = picked();
    lineChart(chartBox, lastData.trials.map((s) => ({
      id: s.trialId, label: `Trial ${s.trialId}`, xs: s.batches, ys: s.values,
    })), { xLabel: "batches", yLabel: `${g} ${metric}`, log: logBox.checked });
    drawScatter();
  };
  const drawScatter = () => {
    if (lastData === null) return;
    const hp = hpSel.select.value;
    const { group: g, metric } = picked();
    setText(scatterTitle, hp ? `${hp} against ${g} ${metric}` : "Hyperparameters against the metric");
    const latest = new Map(lastData.trials.filter((s) => s.values.length).map((s) => [s.trialId, s.values[s.values.length - 1]]));
    scatterChart(scatterBox, trials.map((t) => ({
      id: t.id, label: `Trial ${t.id}`, x: Number(t.hparams?.[hp]), y: latest.get(t.id),
    })).filter((p) => typeof p.y === "number"), {
      xLabel: hp, yLabel: `latest ${g} ${metric}`, logX: logX.checked,
      onPick: (tid) => { location.hash = `#/trials/${tid}`; },
    });
  };
  const keepInHash = () => setHashQuery({ group: group.select.value, metric: metricSel.select.value, hp: hpSel.select.value });
  const repick = () => { keepInHash(); lastSeries = ""; refresh().catch(() => {}); };
  group.select.addEventListener("change", () => { names = null; repick(); });
  metricSel.select.addEventListener("change", repick);
  logBox.addEventListener("change", draw);
  hpSel.select.addEventListener("change", () => { keepInHash(); drawScatter(); });
  logX.addEventListener("change", drawScatter);

  let names = null;  // {stale, trials}: metric names are read again when trials come or go
  let polls = 0;
  let wantedMetric = query.get("metric") || "";
  const refresh = async () => {
    const [{ experiment: e }, trialsData, ckptData] = await Promise.all([
      api.get(`/experiments/${id}`),
      api.get(`/experiments/${id}/trials?limit=1000`),
      api.get(`/experiments/${id}/checkpoints?sortByAttr=SORT_BY_END_TIME&orderBy=ORDER_BY_DESC&limit=100`),
    ]);
    const searcher = e.config?.searcher || {};
    searcherMetric = e.searcherMetric || searcher.metric || "";
    setText(title, `Experiment ${e.id}: ${e.name}`);
    document.title = `${e.name} · Stalwart`;
    const facts = [
      ["State", short(e.state)], ["Searcher", e.searcherType],
      ["Metric", `${searcherMetric} (${searcher.smaller_is_better === false ? "larger" : "smaller"} is better)`],
      ["Progress", e.progress == null ? "–" : `${Math.round(e.progress * 100)}%`],
      ["Trials", String(e.numTrials)], ["Best", fmt(e.bestTrialSearcherMetric)],
      ["Best trial", e.bestTrialId == null ? "–" : String(e.bestTrialId)],
      ["Labels", (e.labels || []).join(", ") || "–"],
      ["User", e.username], ["Started", when(e.startTime)], ["Ended", when(e.endTime)],
    ];
    summary.replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v ?? "–")]));
    actions.update(e.state);
    setText(config, e.originalConfig || "");

    trials = trialsData.trials || [];
    if (hpKeys === null || trials.some((t) => Object.keys(t.hparams || {}).some((k) => !hpKeys.includes(k)))) {
      hpKeys = [...new Set(trials.flatMap((t) => Object.keys(t.hparams || {})))].sort();
      trialsHead.replaceChildren(...["Trial", "State", ...hpKeys, "Batches", `Latest ${searcherMetric}`, `Best ${searcherMetric}`, "Restarts"]
        .map((c) => h("th", { scope: "col" }, c)));
      trialsBody.replaceChildren();
      const numeric = hpKeys.filter((k) => trials.some((t) => typeof t.hparams?.[k] === "number"));
      setOptions(hpSel.select, numeric.map((k) => [k, k]), hpSel.select.value || query.get("hp") || numeric.find((k) => k === "lr") || numeric[0]);
    }
    syncRows(trialsBody, trials, (t) => t.id,
      (t) => h("tr", {}, h("td", {}, h("a", { href: `#/trials/${t.id}`, "aria-label": `Trial ${t.id}` }, String(t.id))),
        ...Array.from({ length: hpKeys.length + 5 }, () => h("td"))),
      (row, t) => {
        const c = row.cells;
        stateCell(c[1], t.state);
        hpKeys.forEach((k, i) => {
          const v = t.hparams?.[k];
          setText(c[2 + i], typeof v === "number" ? fmt(v) : JSON.stringify(v ?? null));
        });
        const n = hpKeys.length + 2;
        const latest = t.latestValidation?.metrics?.avgMetrics?.[searcherMetric];
        c[n].className = "num"; setText(c[n], String(t.totalBatchesProcessed ?? 0));
        c[n + 1].className = "num"; setText(c[n + 1], fmt(typeof latest === "number" ? latest : null));
        c[n + 2].className = "num"; setText(c[n + 2], fmt(t.searcherMetricValue));
        c[n + 3].className = "num"; setText(c[n + 3], String(t.restarts ?? 0));
      });

    if (ckpts === null) { ckpts = checkpointsTable("checkpoints", "checkpoints-title", searcherMetric, true); ckptBox.append(ckpts.box); }
    ckpts.refresh(ckptData.checkpoints || []);

    polls += 1;
    const running = !["COMPLETED", "CANCELED", "ERROR", "DELETED"].includes(short(e.state));
    if (names === null || names.stale || names.trials !== trials.length || (running && polls % 10 === 0)) {
      const answer = await api.get(`/ui/experiments/${id}/metric-names`);
      const found = (answer.groups || []).find((x) => x.group === group.select.value)?.metrics || [];
      const options = [...new Set([...(group.select.value === "validation" && searcherMetric ? [searcherMetric] : []), ...found])];
      const want = wantedMetric || metricSel.select.value || (options.includes(searcherMetric) ? searcherMetric : options[0]) || "";
      wantedMetric = "";
      setOptions(metricSel.select, options.map((m) => [m, m]), want);
      names = { stale: options.length === 0, trials: trials.length };
    }
    const { group: g, metric } = picked();
    if (metric) {
      setText(chartTitle, `Learning curves: ${g} ${metric}`);
      const n = pointsPerTrial(trials.length);
      const series = await api.get(`/ui/experiments/${id}/series?metric=${encodeURIComponent(metric)}&group=${encodeURIComponent(g)}&maxPoints=${n}`);
      const key = JSON.stringify([g, metric, series.trials]);
      if (key !== lastSeries) {  // redraw only when the data changed (keeps the hover)
        lastSeries = key;
        lastData = series;
        draw();
      }
    }
  };
  poll(refresh);
}
