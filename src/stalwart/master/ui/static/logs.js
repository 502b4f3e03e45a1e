// A trial's logs in a role="log" box that follows new lines as they arrive: one streaming
// GET /api/v1/trials/ID/logs?follow=true (NDJSON) at a time, restarted when a filter changes;
// and the simpler panel of an interactive task's logs (GET /api/v1/tasks/ID/logs?follow=true).
import * as api from "./api.js";
import { h, handle, labelledSelect, onLeave, setOptions, setText } from "./dom.js";

export const LEVELS = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
const KEEP_LINES = 5000;

/** Read an NDJSON response line by line, calling `each(object)`; ends with the body. */
export async function readLines(response, each) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) each(JSON.parse(line));
    }
  }
  if (rest.trim()) each(JSON.parse(rest));
}

/** The logs panel of trial `trialId`; returns {box, refreshFields()}. */
export function logsPanel(trialId) {
  const rank = labelledSelect("log-rank", "Rank", [["", "All ranks"]], "");
  const level = labelledSelect("log-level", "Level", [["", "All levels"],
    ...LEVELS.slice(1).map((l) => [l, `${l} and above`])], "");
  const status = h("span", { id: "log-status", class: "muted", "aria-live": "polite" });
  const lines = h("div", { id: "logs", class: "logs", role: "log", tabindex: 0, "aria-label": `Logs of trial ${trialId}` });
  const box = h("div", {}, h("div", { class: "controls" }, rank.box, level.box, status), lines);
  let controller = null;
  let count = 0;

  const start = async () => {
    if (controller) controller.abort();
    const mine = new AbortController();
    controller = mine;
    lines.replaceChildren();
    count = 0;
    const qs = new URLSearchParams({ follow: "true" });
    if (rank.select.value !== "") qs.append("rankIds", rank.select.value);
    if (level.select.value) for (const l of LEVELS.slice(LEVELS.indexOf(level.select.value))) qs.append("levels", l);
    setText(status, "Following…");
    try {
      const response = await fetch(`/api/v1/trials/${trialId}/logs?${qs}`, {
        headers: { Authorization: `Bearer ${api.token()}`, Accept: "application/json" },
        signal: mine.signal, credentials: "omit",
      });
      if (!response.ok) throw new api.ApiError(response.status, (await response.text()) || response.statusText);
      await readLines(response, (item) => {
        if (item.error) throw new Error(item.error.message || JSON.stringify(item.error));
        const r = item.result;
        const stick = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 8;
        const lvl = (r.level || "").replace(/^LOG_LEVEL_/, "");
        const text = (r.log ?? r.message ?? "").replace(/\n$/, "");
        const prefix = r.rankId == null ? "" : `[rank=${r.rankId}] `;
        lines.append(h("div", { class: `log-line level-${lvl || "NONE"}`, "data-rank": r.rankId ?? "", "data-level": lvl },
          `${prefix}${lvl && lvl !== "UNSPECIFIED" ? `${lvl} ` : ""}${text}`));
        count += 1;
        if (lines.childElementCount > KEEP_LINES) lines.firstElementChild.remove();
        if (stick) lines.scrollTop = lines.scrollHeight;
        if (controller === mine) setText(status, `Following: ${count} lines`);
      });
      if (controller === mine) setText(status, `${count} lines; the trial has ended.`);
    } catch (err) {
      if (err?.name === "AbortError") return;
      setText(status, "Stopped following.");
      handle(err);
    }
  };
  const refreshFields = async () => {
    // Without follow the fields stream is a single {"result": {...}} line.
    const answer = await api.get(`/trials/${trialId}/logs/fields`);
    if (answer?.error) throw new Error(answer.error.message || JSON.stringify(answer.error));
    const fields = answer?.result || {};
    const ranks = (fields.rankIds || []).slice().sort((a, b) => a - b);
    setOptions(rank.select, [["", "All ranks"], ...ranks.map((r) => [String(r), `Rank ${r}`])]);
  };
  rank.select.addEventListener("change", start);
  level.select.addEventListener("change", start);
  onLeave(() => { if (controller) controller.abort(); });
  return { box, start, refreshFields };
}

/** The logs panel of interactive task `taskId` (one follow stream, aborted on leaving or on
 * `stop()`); returns {box, start, stop}. */
export function taskLogsPanel(taskId, label) {
  const status = h("span", { id: "task-log-status", class: "muted", "aria-live": "polite" });
  const lines = h("div", { id: "task-logs", class: "logs", role: "log", tabindex: 0, "aria-label": `Logs of ${label}` });
  const box = h("div", {}, h("div", { class: "controls" }, status), lines);
  const controller = new AbortController();
  let count = 0;
  const start = async () => {
    setText(status, "Following…");
    try {
      const response = await fetch(`/api/v1/tasks/${encodeURIComponent(taskId)}/logs?follow=true`, {
        headers: { Authorization: `Bearer ${api.token()}`, Accept: "application/json" },
        signal: controller.signal, credentials: "omit",
      });
      if (!response.ok) throw new api.ApiError(response.status, (await response.text()) || response.statusText);
      await readLines(response, (item) => {
        if (item.error) throw new Error(item.error.message || JSON.stringify(item.error));
        const r = item.result;
        const stick = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 8;
        const text = (r.log ?? r.message ?? "").replace(/\n$/, "");
        lines.append(h("div", { class: `log-line${r.stdtype === "stderr" ? " stderr" : ""}`, "data-source": r.source || "" }, text));
        count += 1;
        if (lines.childElementCount > KEEP_LINES) lines.firstElementChild.remove();
        if (stick) lines.scrollTop = lines.scrollHeight;
        setText(status, `Following: ${count} lines`);
      });
      setText(status, `${count} lines; the task has ended.`);
    } catch (err) {
      if (err?.name === "AbortError") return;
      setText(status, "Stopped following.");
      handle(err);
    }
  };
  const stop = () => controller.abort();
  onLeave(stop);
  return { box, start, stop };
}
