// The Stalwart UI: a hash router (#/login, #/experiments, #/experiments/ID), a theme toggle,
// and pages that poll the REST API every few seconds and update in place (focus is kept).
import * as api from "./api.js";
import { fmt, lineChart } from "./chart.js";

const POLL_MS = Number(localStorage.getItem("stalwart.pollMs")) || 3000;
const main = document.getElementById("main");
let timer = null;
let generation = 0;  // bumped on every navigation; stale polls stop themselves

// --- helpers ------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

const short = (state) => (state || "").replace(/^STATE_/, "");
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

function toast(message) {
  const t = document.getElementById("toast");
  t.textContent = message;
  setTimeout(() => { if (t.textContent === message) t.textContent = ""; }, 4000);
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function stateCell(node, state) {
  const s = short(state);
  setText(node, s);
  node.className = `state state-${s}`;
}

/** Keep `tbody`'s rows in step with `items` (keyed by `key`), creating rows with `make` and
 * refreshing each with `update`; rows are reused so focus and selection survive a poll. */
function syncRows(tbody, items, key, make, update) {
  const existing = new Map([...tbody.rows].map((r) => [r.dataset.key, r]));
  items.forEach((item, index) => {
    const k = String(key(item));
    let row = existing.get(k);
    if (!row) { row = make(item); row.dataset.key = k; }
    existing.delete(k);
    update(row, item);
    if (tbody.rows[index] !== row) tbody.insertBefore(row, tbody.rows[index] || null);
  });
  for (const row of existing.values()) row.remove();
}

function poll(refresh) {
  const mine = generation;
  const tick = async () => {
    if (mine !== generation) return;
    try { await refresh(); } catch (err) { handle(err); }
    if (mine === generation) timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

function handle(err) {
  if (err instanceof api.ApiError && err.status === 401) {
    api.forget();
    location.hash = "#/login";
    return;
  }
  console.error(err);
  toast(`Error: ${err.message}`);
}

/** Pause, activate and kill buttons for experiment `id`; `update(state)` enables them. */
function experimentActions(id, after) {
  const act = async (verb) => {
    if (verb === "kill" && !window.confirm(`Kill experiment ${id}?`)) return;
    try {
      await api.post(`/experiments/${id}/${verb}`);
      toast(`Experiment ${id}: ${verb} sent`);
      await after();
    } catch (err) { handle(err); }
  };
  const make = (verb, label, cls) => h("button", {
    type: "button", class: cls, "data-action": verb,
    "aria-label": `${label} experiment ${id}`, onclick: () => act(verb),
  }, label);
  const pause = make("pause", "Pause");
  const activate = make("activate", "Activate");
  const kill = make("kill", "Kill", "danger");
  const box = h("div", { class: "actions" }, pause, activate, kill);
  const update = (state) => {
    const s = short(state);
    const terminal = ["COMPLETED", "CANCELED", "ERROR", "DELETED"].includes(s) || s.startsWith("STOPPING");
    pause.disabled = terminal || s === "PAUSED";
    activate.disabled = terminal || s !== "PAUSED";
    kill.disabled = terminal;
  };
  return { box, update };
}

// --- pages --------------------------------------------------------------------------------

function loginPage() {
  const user = h("input", { id: "username", name: "username", autocomplete: "username", required: true, value: "admin" });
  const password = h("input", { id: "password", name: "password", type: "password", autocomplete: "current-password" });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "login", "aria-labelledby": "login-title" },
    h("h1", { id: "login-title" }, "Sign in to Stalwart"),
    h("label", { for: "username" }, "Username"), user,
    h("label", { for: "password" }, "Password"), password,
    error,
    h("button", { type: "submit", class: "primary" }, "Sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      await api.login(user.value.trim(), password.value);
      location.hash = "#/experiments";
    } catch (err) {
      error.textContent = err.status === 401 || err.status === 403
        ? "Wrong username or password." : `Could not sign in: ${err.message}`;
    }
  });
  main.replaceChildren(form);
  user.focus();
}

function experimentsPage() {
  const tbody = h("tbody");
  const table = h("table", { id: "experiments", "aria-describedby": "experiments-title" },
    h("thead", {}, h("tr", {}, ...["ID", "Name", "State", "Progress", "Searcher", "Trials",
      "Best metric", "User", "Started", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
    tbody);
  const empty = h("p", { class: "empty", hidden: true }, "No experiments yet: create one with `stalwart e create CONFIG DIR`.");
  main.replaceChildren(h("h1", { id: "experiments-title" }, "Experiments"), h("div", { class: "scroll" }, table), empty);

  const refresh = async () => {
    const data = await api.get("/experiments?sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC&limit=200");
    const items = data.experiments || [];
    empty.hidden = items.length > 0;
    syncRows(tbody, items, (e) => e.id, (e) => {
      const actions = experimentActions(e.id, refresh);
      const row = h("tr", {},
        h("td", { class: "num" }, String(e.id)),
        h("td", {}, h("a", { href: `#/experiments/${e.id}` })),
        h("td", {}), h("td", {}, h("progress", { max: 1 })), h("td", {}), h("td", { class: "num" }),
        h("td", { class: "num" }), h("td", {}), h("td", {}), h("td", {}, actions.box));
      row.actions = actions;
      return row;
    }, (row, e) => {
      const c = row.cells;
      setText(c[1].firstChild, e.name);
      stateCell(c[2], e.state);
      const bar = c[3].firstChild;
      const p = e.progress ?? (short(e.state) === "COMPLETED" ? 1 : 0);
      bar.value = p;
      bar.setAttribute("aria-label", `Progress of experiment ${e.id}: ${Math.round(p * 100)}%`);
      bar.title = `${Math.round(p * 100)}%`;
      setText(c[4], e.searcherType || "");
      setText(c[5], String(e.numTrials ?? 0));
      setText(c[6], fmt(e.bestTrialSearcherMetric));
      setText(c[7], e.displayName || e.username || "");
      setText(c[8], when(e.startTime));
      row.actions.update(e.state);
    });
  };
  poll(refresh);
}

function experimentPage(id) {
  const title = h("h1", {}, `Experiment ${id}`);
  const summary = h("dl", { class: "summary", id: "summary" });
  const actions = experimentActions(id, () => refresh());
  const chartBox = h("div", { id: "chart" });
  const logBox = h("input", { type: "checkbox", id: "log-scale" });
  const logLabel = h("label", { for: "log-scale" }, logBox, " Log scale");
  const chartTitle = h("h2", { id: "chart-title" }, "Learning curves");
  const trialsBody = h("tbody");
  const trialsHead = h("tr");
  const trialsTable = h("table", { id: "trials", "aria-labelledby": "trials-title" }, h("thead", {}, trialsHead), trialsBody);
  const config = h("pre", { class: "config", id: "config" });
  main.replaceChildren(
    h("p", {}, h("a", { href: "#/experiments" }, "← Experiments")),
    title, summary, actions.box,
    chartTitle, logLabel, chartBox,
    h("h2", { id: "trials-title" }, "Trials"), h("div", { class: "scroll" }, trialsTable),
    h("details", {}, h("summary", {}, "Config (YAML as submitted)"), config));

  let hpKeys = null;
  let lastSeries = "";
  let lastData = null;
  const draw = () => {
    if (lastData === null) return;
    lineChart(chartBox, lastData.trials.map((s) => ({
      id: s.trialId, label: `Trial ${s.trialId}`, xs: s.batches, ys: s.values,
    })), { xLabel: "batches", yLabel: lastData.metric, log: logBox.checked });
  };
  logBox.addEventListener("change", draw);
  const refresh = async () => {
    const [{ experiment: e }, trialsData] = await Promise.all([
      api.get(`/experiments/${id}`),
      api.get(`/experiments/${id}/trials?limit=1000`),
    ]);
    const searcher = e.config?.searcher || {};
    const metric = e.searcherMetric || searcher.metric || "";
    setText(title, `Experiment ${e.id}: ${e.name}`);
    document.title = `${e.name} · Stalwart`;
    const facts = [
      ["State", short(e.state)], ["Searcher", e.searcherType],
      ["Metric", `${metric} (${searcher.smaller_is_better === false ? "larger" : "smaller"} is better)`],
      ["Progress", e.progress == null ? "–" : `${Math.round(e.progress * 100)}%`],
      ["Trials", String(e.numTrials)], ["Best", fmt(e.bestTrialSearcherMetric)],
      ["Best trial", e.bestTrialId == null ? "–" : String(e.bestTrialId)],
      ["User", e.username], ["Started", when(e.startTime)], ["Ended", when(e.endTime)],
    ];
    summary.replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v ?? "–")]));
    actions.update(e.state);
    setText(config, e.originalConfig || "");

    const trials = trialsData.trials || [];
    if (hpKeys === null || trials.some((t) => Object.keys(t.hparams || {}).some((k) => !hpKeys.includes(k)))) {
      hpKeys = [...new Set(trials.flatMap((t) => Object.keys(t.hparams || {})))].sort();
      trialsHead.replaceChildren(...["Trial", "State", ...hpKeys, "Batches", `Best ${metric}`, "Restarts"]
        .map((c) => h("th", { scope: "col" }, c)));
      trialsBody.replaceChildren();
    }
    syncRows(trialsBody, trials, (t) => t.id,
      () => h("tr", {}, ...Array.from({ length: hpKeys.length + 5 }, () => h("td"))),
      (row, t) => {
        const c = row.cells;
        setText(c[0], String(t.id));
        stateCell(c[1], t.state);
        hpKeys.forEach((k, i) => {
          const v = t.hparams?.[k];
          setText(c[2 + i], typeof v === "number" ? fmt(v) : JSON.stringify(v ?? null));
        });
        const n = hpKeys.length + 2;
        c[n].className = "num"; setText(c[n], String(t.totalBatchesProcessed ?? 0));
        c[n + 1].className = "num"; setText(c[n + 1], fmt(t.searcherMetricValue));
        c[n + 2].className = "num"; setText(c[n + 2], String(t.restarts ?? 0));
      });

    if (metric) {
      setText(chartTitle, `Learning curves: validation ${metric}`);
      const series = await api.get(`/ui/experiments/${id}/series?metric=${encodeURIComponent(metric)}&group=validation&maxPoints=1000`);
      const key = JSON.stringify(series.trials);
      if (key !== lastSeries) {  // redraw only when the data changed (keeps the hover)
        lastSeries = key;
        lastData = series;
        draw();
      }
    }
  };
  poll(refresh);
}

// --- router and chrome --------------------------------------------------------------------

function route() {
  generation += 1;
  clearTimeout(timer);
  const hash = location.hash || "#/experiments";
  const signedIn = Boolean(api.token());
  document.getElementById("sign-out").hidden = !signedIn;
  document.getElementById("who").textContent = signedIn ? `Signed in as ${api.username()}` : "";
  const nav = document.getElementById("nav-experiments");
  if (hash.startsWith("#/experiments") && signedIn) nav.setAttribute("aria-current", "page");
  else nav.removeAttribute("aria-current");
  if (!signedIn || hash === "#/login") {
    if (signedIn) { location.hash = "#/experiments"; return; }
    document.title = "Sign in · Stalwart";
    loginPage();
    return;
  }
  const match = hash.match(/^#\/experiments\/(\d+)$/);
  if (match) experimentPage(Number(match[1]));
  else { document.title = "Experiments · Stalwart"; experimentsPage(); }
  main.focus({ preventScroll: true });
}

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  const button = document.getElementById("theme-toggle");
  button.setAttribute("aria-pressed", String(theme === "dark"));
  button.textContent = theme === "dark" ? "Light theme" : "Dark theme";
  button.setAttribute("aria-label", `Switch to the ${theme === "dark" ? "light" : "dark"} theme`);
}

const dark = window.matchMedia("(prefers-color-scheme: dark)");
applyTheme(localStorage.getItem("stalwart.theme") || (dark.matches ? "dark" : "light"));
dark.addEventListener("change", (e) => {
  if (!localStorage.getItem("stalwart.theme")) applyTheme(e.matches ? "dark" : "light");
});
document.getElementById("theme-toggle").addEventListener("click", () => {
  const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  localStorage.setItem("stalwart.theme", next);
  applyTheme(next);
});
document.getElementById("sign-out").addEventListener("click", async () => {
  await api.logout();
  location.hash = "#/login";
  route();
});
window.addEventListener("hashchange", route);
route();
