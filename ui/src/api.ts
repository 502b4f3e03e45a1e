// The REST API under /api/v1, with the session token kept in this tab's sessionStorage.
const TOKEN_KEY = "stalwart.token";
const USER_KEY = "stalwart.user";

/** Raised for a non-2xx answer; `status` is the HTTP status. */
export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Raised when the master could not be reached at all (no answer: network down, master
 * stopped); the shell shows the offline banner instead of a toast. */
export class OfflineError extends Error {}

type ConnectionListener = (online: boolean) => void;
const connectionListeners = new Set<ConnectionListener>();
let reachable = true;

/** Be told when the master stops or starts answering (every call reports what it saw). */
export function onConnection(listener: ConnectionListener): () => void {
  connectionListeners.add(listener);
  return () => { connectionListeners.delete(listener); };
}

function reached(online: boolean): void {
  if (online === reachable) return;
  reachable = online;
  for (const listener of connectionListeners) listener(online);
}

export const token = (): string | null => sessionStorage.getItem(TOKEN_KEY);
export const username = (): string => sessionStorage.getItem(USER_KEY) ?? "";

export function forget(): void {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(USER_KEY);
}

/** The headers of an authenticated call (the token, never the cookie). */
export function authHeaders(): Record<string, string> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

function messageOf(data: unknown, fallback: string): string {
  if (data && typeof data === "object") {
    const d = data as { message?: unknown; error?: unknown };
    if (typeof d.message === "string") return d.message;
    if (typeof d.error === "string") return d.error;
    if (d.error && typeof d.error === "object") {
      const inner = (d.error as { error?: unknown }).error;
      if (typeof inner === "string") return inner;
    }
  }
  return fallback;
}

/** Call `method path` (relative to /api/v1) with an optional JSON body; the parsed answer.
 * API calls send the token and never the cookie (`credentials: "omit"`). */
export async function call<T>(
  method: string, path: string, body?: unknown, credentials: RequestCredentials = "omit",
  signal?: AbortSignal,
): Promise<T> {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(`/api/v1${path}`, {
      method, headers, credentials, signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    reached(false);
    throw new OfflineError(`cannot reach the Stalwart master (${err instanceof Error ? err.message : String(err)})`);
  }
  reached(true);
  const text = await response.text();
  let data: unknown = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, messageOf(data, text || response.statusText));
  return data as T;
}

export const get = <T>(path: string, signal?: AbortSignal): Promise<T> =>
  call<T>("GET", path, undefined, "omit", signal);
export const post = <T = unknown>(path: string, body: unknown = {}): Promise<T> => call<T>("POST", path, body);

interface LoginAnswer { token: string; user?: { username?: string } }

/** Log in; keeps the token and the username for this tab. The master's `auth` cookie (httponly)
 * is stored too: a TensorBoard opened from the Tasks page (/proxy/ID/, a new tab) is reached
 * with it, as the master's proxy allows; API calls never send it. */
export async function login(user: string, password: string): Promise<void> {
  const answer = await call<LoginAnswer>("POST", "/auth/login", { username: user, password }, "same-origin");
  sessionStorage.setItem(TOKEN_KEY, answer.token);
  sessionStorage.setItem(USER_KEY, answer.user?.username ?? user);
}

/** Log out on the server (best effort) and forget the token. */
export async function logout(): Promise<void> {
  try { await post("/auth/logout"); } catch { /* the token may already be gone */ }
  forget();
}
