// What every page uses from the shell: toasts, error handling (a 401 goes to sign-in), polling
// tied to the page's life, and the query part of the hash (#/experiments?state=ACTIVE).
import { createContext, useCallback, useContext, useEffect, useLayoutEffect, useRef } from "react";
import { NavigationType, useLocation, useNavigationType, useSearchParams } from "react-router-dom";
import { ApiError } from "./api";

export interface Shell {
  toast: (message: string) => void;
  /** Report an error: a 401 forgets the token and goes to sign-in, an abort is ignored, anything
   * else is a toast. */
  handle: (err: unknown) => void;
}

export const ShellContext = createContext<Shell>({ toast: () => undefined, handle: () => undefined });
export const useShell = (): Shell => useContext(ShellContext);

/** How often pages poll: 3 s, or `localStorage["stalwart.pollMs"]` (the tests use 500 ms). */
export const POLL_MS = Number(localStorage.getItem("stalwart.pollMs")) || 3000;

export const isAbort = (err: unknown): boolean =>
  err instanceof DOMException ? err.name === "AbortError" : (err as { name?: string } | null)?.name === "AbortError";

export const isApiError = (err: unknown, status: number): boolean => err instanceof ApiError && err.status === status;

/** A refresh: reads what it needs (aborted with `signal` when the page or its key changes) and
 * answers `false` when nothing it reads can change any more (polling stops). */
export type Refresh = (signal: AbortSignal) => Promise<boolean | void>;

/**
 * Call `refresh` now and every POLL_MS while the page is shown and `key` stays the same (a new
 * key starts over at once); errors go to the shell's `handle`. Returns `now()`, which refreshes
 * at once (after an action).
 */
export function usePoll(refresh: Refresh, key: string): () => void {
  const { handle } = useShell();
  const latest = useRef(refresh);
  useLayoutEffect(() => { latest.current = refresh; });
  const nowRef = useRef<() => void>(() => undefined);
  useEffect(() => {
    const controller = new AbortController();
    let timer: number | undefined;
    const tick = async (): Promise<void> => {
      window.clearTimeout(timer);
      let again = true;
      try {
        again = (await latest.current(controller.signal)) !== false;
      } catch (err) {
        if (!controller.signal.aborted && !isAbort(err)) handle(err);
      }
      if (controller.signal.aborted) return;
      if (again) timer = window.setTimeout(() => void tick(), POLL_MS);
    };
    nowRef.current = () => { if (!controller.signal.aborted) void tick(); };
    void tick();
    return () => { controller.abort(); window.clearTimeout(timer); };
  }, [key, handle]);
  return useCallback(() => nowRef.current(), []);
}

/**
 * Call `read` when the page is shown, when `key` changes, when the tab becomes visible again
 * (document's visibilitychange) and when the returned `now()` is called (after an action), but
 * never on a timer: for pages whose data changes only by what people do (the admin's users).
 */
export function useRead(read: (signal: AbortSignal) => Promise<unknown>, key: string): () => void {
  const now = usePoll(async (signal) => { await read(signal); return false; }, key);
  useEffect(() => {
    const shown = (): void => { if (document.visibilityState === "visible") now(); };
    document.addEventListener("visibilitychange", shown);
    return () => document.removeEventListener("visibilitychange", shown);
  }, [now]);
  return now;
}

/** `path` decoded (as the router's location may hold it), or as it is when it does not decode. */
const decoded = (path: string): string => {
  try { return decodeURI(path); } catch { return path; }
};
/** The hash's path, as the address bar has it now (the router may not have rendered it yet). */
const addressPath = (): string => decoded(window.location.hash.replace(/^#/, "").split("?")[0] || "/");

/** The hash's query, and a setter that replaces it (empty values dropped) without adding a
 * history entry. `onExternal` runs when the query changes by other means (a link followed, an
 * address typed, back or forward: a POP navigation), and the page reads its choices from it
 * again; the page's own writes (REPLACE) never come back to it, even when the router renders an
 * older one late. A write made once the address has left the page's path (the user went on
 * before the page's effect ran) is dropped: it would replace the new address with the page's. */
export function useHashQuery(onExternal?: (params: URLSearchParams) => void): [URLSearchParams, (params: Record<string, string>) => void] {
  const [params, setParams] = useSearchParams();
  const navigationType = useNavigationType();
  const { pathname } = useLocation();
  const pathRef = useRef(pathname);
  useLayoutEffect(() => { pathRef.current = pathname; });
  const search = params.toString();
  const written = useRef(search);
  const external = useRef(onExternal);
  useLayoutEffect(() => { external.current = onExternal; });
  useEffect(() => {
    if (navigationType !== NavigationType.Pop || search === written.current) return;
    written.current = search;
    external.current?.(new URLSearchParams(search));
  }, [search, navigationType]);
  // The setter keeps its identity across navigations (react-router's does not), so that a page's
  // effect that writes its choices runs when they change, never with stale ones on a navigation.
  const setParamsRef = useRef(setParams);
  useLayoutEffect(() => { setParamsRef.current = setParams; });
  const set = useCallback((values: Record<string, string>) => {
    const kept: Record<string, string> = {};
    for (const [k, v] of Object.entries(values)) if (v) kept[k] = v;
    if (addressPath() !== decoded(pathRef.current)) return;
    written.current = new URLSearchParams(kept).toString();
    setParamsRef.current(kept, { replace: true });
  }, []);
  return [params, set];
}
