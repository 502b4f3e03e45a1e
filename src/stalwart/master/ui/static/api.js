// The REST API under /api/v1, with the session token kept in this tab's sessionStorage.
const TOKEN_KEY = "stalwart.token";
const USER_KEY = "stalwart.user";

/** Raised for a non-2xx answer; `status` is the HTTP status. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function username() { return sessionStorage.getItem(USER_KEY) || ""; }

export function forget() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(USER_KEY);
}

/** Call `method path` (relative to /api/v1) with an optional JSON body; the parsed answer.
 * API calls send the token and never the cookie (`credentials`: "omit"). */
export async function call(method, path, body, credentials = "omit") {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials,
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const message = (data && (data.message || data.error?.error || data.error)) || response.statusText;
    throw new ApiError(response.status, typeof message === "string" ? message : text);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);

/** Log in; keeps the token and the username for this tab. The master's `auth` cookie (httponly)
 * is stored too: a TensorBoard opened from the Tasks page (/proxy/ID/, a new tab) is reached
 * with it, as the master's proxy allows; API calls never send it. */
export async function login(user, password) {
  const answer = await call("POST", "/auth/login", { username: user, password }, "same-origin");
  sessionStorage.setItem(TOKEN_KEY, answer.token);
  sessionStorage.setItem(USER_KEY, answer.user?.username || user);
  return answer;
}

/** Log out on the server (best effort) and forget the token. */
export async function logout() {
  try { await post("/auth/logout"); } catch { /* the token may already be gone */ }
  forget();
}
