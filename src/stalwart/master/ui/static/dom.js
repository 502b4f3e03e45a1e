// Shared by the pages: element building, in-place updates, polling tied to the current page,
// error handling, and the query part of the URL hash (#/experiments?state=ACTIVE).
import * as api from "./api.js";

export const POLL_MS = Number(localStorage.getItem("stalwart.pollMs")) || 3000;
export const main = document.getElementById("main");

let generation = 0;  // bumped on every navigation; stale polls and streams stop themselves
let timer = null;
const cleanups = [];

/** A new page starts: stop the previous page's poll and run its cleanups (log streams). */
export function newPage() {
  generation += 1;
  clearTimeout(timer);
  while (cleanups.length) {
    try { cleanups.pop()(); } catch { /* best effort */ }
  }
  return generation;
}

/** Whether the page that started as `mine` is still the one shown. */
export const current = (mine) => mine === generation;

/** Run `fn` when the user leaves this page. */
export function onLeave(fn) { cleanups.push(fn); }

export function h(tag, attrs = {}, ...children) {
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

export const short = (state) => (state || "").replace(/^STATE_/, "");
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

export function bytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0, x = v;
  while (x >= 1000 && i < units.length - 1) { x /= 1000; i += 1; }
  return `${i ? x.toFixed(1) : x} ${units[i]}`;
}

export function toast(message) {
  const t = document.getElementById("toast");
  t.textContent = message;
  setTimeout(() => { if (t.textContent === message) t.textContent = ""; }, 4000);
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

export function stateCell(node, state) {
  const s = short(state);
  setText(node, s);
  node.className = `state state-${s}`;
}

/** Keep `tbody`'s rows in step with `items` (keyed by `key`), creating rows with `make` and
 * refreshing each with `update`; rows are reused so focus and selection survive a poll. */
export function syncRows(tbody, items, key, make, update) {
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

/** A table with a header row of `columns`; returns {table, tbody}. */
export function table(id, labelledBy, columns) {
  const tbody = h("tbody");
  const t = h("table", { id, "aria-labelledby": labelledBy },
    h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", { scope: "col" }, c)))), tbody);
  return { table: t, tbody };
}

/** Call `refresh` now and every POLL_MS while this page is shown. */
export function poll(refresh) {
  const mine = generation;
  const tick = async () => {
    if (mine !== generation) return;
    try { await refresh(); } catch (err) { handle(err); }
    if (mine === generation) timer = setTimeout(tick, POLL_MS);
  };
  tick();
}

export function handle(err) {
  if (err instanceof api.ApiError && err.status === 401) {
    api.forget();
    location.hash = "#/login";
    return;
  }
  if (err?.name === "AbortError") return;
  console.error(err);
  toast(`Error: ${err.message}`);
}

/** The hash's query (`#/experiments?state=ACTIVE&user=ann`) as URLSearchParams. */
export function hashQuery() {
  const hash = location.hash || "";
  const i = hash.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : hash.slice(i + 1));
}

/** Replace the hash's query with `params` (empty values dropped) without re-routing. */
export function setHashQuery(params) {
  const hash = location.hash || "#/experiments";
  const path = hash.split("?")[0];
  const kept = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) kept.set(k, v);
  const text = kept.toString();
  history.replaceState(null, "", text ? `${path}?${text}` : path);
}

/** A labelled <select> (returns {box, select}); `options` are [value, text] pairs. */
export function labelledSelect(id, label, options, value) {
  const select = h("select", { id, name: id });
  setOptions(select, options, value);
  return { box: h("span", { class: "field" }, h("label", { for: id }, label), select), select };
}

/** Replace a <select>'s options, keeping `value` selected when it is one of them. */
export function setOptions(select, options, value = select.value) {
  const key = JSON.stringify(options);
  if (select.dataset.options !== key) {
    select.dataset.options = key;
    select.replaceChildren(...options.map(([v, text]) => h("option", { value: v }, text)));
  }
  if (options.some(([v]) => v === value)) select.value = value;
}
