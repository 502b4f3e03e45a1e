// Log panels that follow: a trial's logs (one streaming GET /api/v1/trials/ID/logs?follow=true,
// NDJSON, restarted when a filter changes: server-side search, rank, level, follow on or off;
// each line with its timestamp; a Download button for the same lines as a text file through
// GET /api/v1/ui/trials/ID/logs/download) and an interactive task's logs
// (GET /api/v1/tasks/ID/logs?follow=true). Lines are appended to the box directly (not through
// React state): a busy trial writes thousands, and only the newest 5,000 are kept.
import { useEffect, useRef, useState } from "react";
import * as api from "../api";
import { isAbort, usePoll, useShell } from "../app";
import { LabelledSelect } from "./common";
import "./debug.css";

export const LEVELS = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];
const KEEP_LINES = 5000;

interface LogItem { log?: string; message?: string; level?: string; rankId?: number | null; stdtype?: string; source?: string; timestamp?: string }
type Stream = { result?: LogItem; error?: { message?: string } };

/** Read an NDJSON response line by line, calling `each(object)`; ends with the body. */
export async function readLines(response: Response, each: (item: Stream) => void): Promise<void> {
  if (!response.body) return;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) each(JSON.parse(line) as Stream);
    }
  }
  if (rest.trim()) each(JSON.parse(rest) as Stream);
}

/** Follow `url` into `box`, one element per line made by `make`; `status` tells how far. */
async function follow(url: string, signal: AbortSignal, box: HTMLElement, status: (text: string) => void,
  make: (item: LogItem) => HTMLElement, ended: string, live = true): Promise<void> {
  box.replaceChildren();
  const verb = live ? "Following" : "Reading";
  status(`${verb}…`);
  let count = 0;
  const response = await fetch(url, { headers: api.authHeaders(), signal, credentials: "omit" });
  if (!response.ok) throw new api.ApiError(response.status, (await response.text()) || response.statusText);
  await readLines(response, (item) => {
    if (item.error) throw new Error(item.error.message ?? JSON.stringify(item.error));
    if (!item.result) return;
    const stick = box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
    box.append(make(item.result));
    count += 1;
    if (box.childElementCount > KEEP_LINES) box.firstElementChild?.remove();
    if (stick) box.scrollTop = box.scrollHeight;
    status(`${verb}: ${count} lines`);
  });
  status(`${count} lines; ${ended}`);
}

function lineElement(className: string, text: string, data: Record<string, string>): HTMLElement {
  const div = document.createElement("div");
  div.className = className;
  for (const [k, v] of Object.entries(data)) div.dataset[k] = v;
  div.textContent = text;
  return div;
}

/** A log line's time for people: `2026-12-04 16:01:02.500Z` (UTC, as the download writes it). */
export function logTime(iso: string | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace("T", " ");
}

/** The query of the trial's logs for the filters picked (`levels` from `level` up). */
export function logQuery(f: { rank: string; level: string; search: string }): URLSearchParams {
  const qs = new URLSearchParams();
  if (f.search) qs.append("searchText", f.search);
  if (f.rank !== "") qs.append("rankIds", f.rank);
  if (f.level) for (const l of LEVELS.slice(LEVELS.indexOf(f.level))) qs.append("levels", l);
  return qs;
}

/** Download `url` (with the token) as `name`: through a blob, since a link cannot send the
 * Authorization header. */
export async function download(url: string, name: string): Promise<void> {
  const response = await fetch(url, { headers: api.authHeaders(), credentials: "omit" });
  if (!response.ok) throw new api.ApiError(response.status, (await response.text()) || response.statusText);
  const blob = await response.blob();
  const href = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = href;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(href), 60_000);
}

/** The logs panel of trial `trialId`; `ended` stops reading the ranks it offers. */
export function TrialLogs({ trialId, ended }: { trialId: number; ended: boolean }) {
  const { handle } = useShell();
  const [rank, setRank] = useState("");
  const [level, setLevel] = useState("");
  const [typed, setTyped] = useState("");
  const [search, setSearch] = useState("");
  const [following, setFollowing] = useState(true);
  const [downloading, setDownloading] = useState(false);
  // The search is sent once typing pauses (a new stream per change).
  useEffect(() => {
    const timer = window.setTimeout(() => setSearch(typed), 300);
    return () => window.clearTimeout(timer);
  }, [typed]);
  const [ranks, setRanks] = useState<number[]>([]);
  const [status, setStatus] = useState("");
  const box = useRef<HTMLDivElement>(null);

  usePoll(async (signal) => {
    // Without follow the fields stream is a single {"result": {...}} line.
    const answer = await api.get<{ result?: { rankIds?: number[] }; error?: { message?: string } }>(`/trials/${trialId}/logs/fields`, signal);
    if (answer.error) throw new Error(answer.error.message ?? JSON.stringify(answer.error));
    if (!signal.aborted) setRanks((answer.result?.rankIds ?? []).slice().sort((a, b) => a - b));
    return !ended;
  }, `${trialId} ${ended}`);

  useEffect(() => {
    const node = box.current;
    if (!node) return undefined;
    const controller = new AbortController();
    const qs = logQuery({ rank, level, search });
    if (following) qs.append("follow", "true");
    const make = (r: LogItem): HTMLElement => {
      const lvl = (r.level ?? "").replace(/^LOG_LEVEL_/, "");
      const text = (r.log ?? r.message ?? "").replace(/\n$/, "");
      const prefix = r.rankId == null ? "" : `[rank=${r.rankId}] `;
      const line = lineElement(`log-line level-${lvl || "NONE"}`, `${prefix}${lvl && lvl !== "UNSPECIFIED" ? `${lvl} ` : ""}${text}`,
        { rank: r.rankId == null ? "" : String(r.rankId), level: lvl });
      if (r.timestamp) {
        const time = document.createElement("time");
        time.dateTime = r.timestamp;
        time.textContent = `${logTime(r.timestamp)} `;
        line.prepend(time);
      }
      return line;
    };
    follow(`/api/v1/trials/${trialId}/logs?${qs.toString()}`, controller.signal, node,
      (text) => { if (!controller.signal.aborted) setStatus(text); }, make,
      following ? "the trial has ended." : "not following (turn Follow on for new lines).", following)
      .catch((err: unknown) => {
        if (isAbort(err) || controller.signal.aborted) return;
        setStatus("Stopped following.");
        handle(err);
      });
    return () => controller.abort();
  }, [trialId, rank, level, search, following, handle]);

  const save = (): void => {
    setDownloading(true);
    const qs = logQuery({ rank, level, search: typed });
    download(`/api/v1/ui/trials/${trialId}/logs/download?${qs.toString()}`, `trial-${trialId}-logs.txt`)
      .catch(handle).finally(() => setDownloading(false));
  };

  return (
    <div>
      <div className="controls">
        <span className="field">
          <label htmlFor="log-search">Search (case-sensitive)</label>
          <input type="search" id="log-search" value={typed} onChange={(e) => setTyped(e.target.value)}
            onKeyDown={(e) => { if (e.key === "Enter") setSearch(typed); }} />
        </span>
        <LabelledSelect id="log-rank" label="Rank" value={rank} onChange={setRank}
          options={[["", "All ranks"], ...ranks.map((r): [string, string] => [String(r), `Rank ${r}`])]} />
        <LabelledSelect id="log-level" label="Level" value={level} onChange={setLevel}
          options={[["", "All levels"], ...LEVELS.slice(1).map((l): [string, string] => [l, `${l} and above`])]} />
        <label htmlFor="log-follow" className="field">
          <input type="checkbox" id="log-follow" checked={following} onChange={(e) => setFollowing(e.target.checked)} /> Follow
        </label>
        <button type="button" id="log-download" onClick={save} disabled={downloading}>Download</button>
        <span id="log-status" className="muted" aria-live="polite">{status}</span>
      </div>
      {/* Lines are appended here by follow(); React renders no children in it. */}
      <div id="logs" className="logs" role="log" tabIndex={0} aria-label={`Logs of trial ${trialId}`} ref={box} />
    </div>
  );
}

/** The logs panel of interactive task `taskId` (one follow stream, aborted on unmount). */
export function TaskLogs({ taskId, label }: { taskId: string; label: string }) {
  const { handle } = useShell();
  const [status, setStatus] = useState("");
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const node = box.current;
    if (!node) return undefined;
    const controller = new AbortController();
    const make = (r: LogItem): HTMLElement => lineElement(`log-line${r.stdtype === "stderr" ? " stderr" : ""}`,
      (r.log ?? r.message ?? "").replace(/\n$/, ""), { source: r.source ?? "" });
    follow(`/api/v1/tasks/${encodeURIComponent(taskId)}/logs?follow=true`, controller.signal, node,
      (text) => { if (!controller.signal.aborted) setStatus(text); }, make, "the task has ended.")
      .catch((err: unknown) => {
        if (isAbort(err) || controller.signal.aborted) return;
        setStatus("Stopped following.");
        handle(err);
      });
    return () => controller.abort();
  }, [taskId, handle]);
  return (
    <div>
      <div className="controls"><span id="task-log-status" className="muted" aria-live="polite">{status}</span></div>
      <div id="task-logs" className="logs" role="log" tabIndex={0} aria-label={`Logs of ${label}`} ref={box} />
    </div>
  );
}
