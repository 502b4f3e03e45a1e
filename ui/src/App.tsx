// The shell: skip link, header (nav, Admin for admins, who is signed in, theme toggle, sign out), an
// offline banner while the master does not answer, the page in <main>, and a toast region. Signed out, every address shows the sign-in page.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Link, Navigate, NavigationType, Route, Routes, useLocation, useNavigate, useNavigationType } from "react-router-dom";
import * as api from "./api";
import { isAbort, ShellContext, type Shell } from "./app";
import { AdminPage } from "./pages/Admin";
import { ClusterPage } from "./pages/Cluster";
import { ComparePage } from "./pages/Compare";
import { ExperimentPage } from "./pages/Experiment";
import { ExperimentsPage } from "./pages/Experiments";
import { JobsPage } from "./pages/Jobs";
import { LoginPage } from "./pages/Login";
import { ModelPage } from "./pages/Model";
import { ModelsPage } from "./pages/Models";
import { NotFoundPage } from "./pages/NotFound";
import { ProjectPage } from "./pages/Project";
import { SettingsPage } from "./pages/Settings";
import { TasksPage } from "./pages/Tasks";
import { TemplatesPage } from "./pages/Templates";
import { TrialPage } from "./pages/Trial";
import { WebhooksPage } from "./pages/Webhooks";
import { WorkspacePage } from "./pages/Workspace";
import { WorkspacesPage } from "./pages/Workspaces";
import { initialTheme, savedTheme, saveTheme, ThemeContext, type Theme } from "./theme";

const NAV: [string, string, RegExp][] = [
  ["nav-experiments", "Experiments", /^\/(experiments|trials|compare)/],
  ["nav-tasks", "Tasks", /^\/tasks/],
  ["nav-cluster", "Cluster", /^\/cluster/],
  ["nav-webhooks", "Webhooks", /^\/webhooks/],
  ["nav-templates", "Templates", /^\/templates/],
  ["nav-workspaces", "Workspaces", /^\/(workspaces|projects)/],
  ["nav-models", "Models", /^\/models/],
  ["nav-jobs", "Jobs", /^\/jobs/],
];

export function App() {
  const location = useLocation();
  const navigate = useNavigate();
  const navigationType = useNavigationType();
  const mainRef = useRef<HTMLElement>(null);
  const [theme, setTheme] = useState<Theme>(initialTheme);
  const [toastText, setToastText] = useState("");
  const [session, setSession] = useState(0);  // bumped on sign-in and sign-out
  const [admin, setAdmin] = useState(false);  // whether the signed-in user is an admin (GET /me)
  const [offline, setOffline] = useState(false);  // the last call got no answer (or the browser is offline)
  const signedIn = Boolean(api.token());

  // The Admin link shows for admins only (the page itself tells anyone else it is theirs).
  useEffect(() => {
    if (!signedIn) { setAdmin(false); return undefined; }
    const controller = new AbortController();
    api.get<{ user: { admin?: boolean } }>("/me", controller.signal)
      .then((answer) => setAdmin(Boolean(answer.user.admin)))
      .catch(() => { if (!controller.signal.aborted) setAdmin(false); });
    return () => controller.abort();
  }, [signedIn, session]);

  // Offline: a call got no answer, or the browser lost its network; the next answer clears it
  // (pages keep polling, so they recover by themselves).
  useEffect(() => {
    const browserOffline = (): void => setOffline(true);
    window.addEventListener("offline", browserOffline);
    const stop = api.onConnection((online) => setOffline(!online));
    return () => { window.removeEventListener("offline", browserOffline); stop(); };
  }, []);

  useEffect(() => {
    document.documentElement.dataset.theme = theme;
  }, [theme]);
  useEffect(() => {
    const dark = window.matchMedia("(prefers-color-scheme: dark)");
    const follow = (e: MediaQueryListEvent): void => { if (!savedTheme()) setTheme(e.matches ? "dark" : "light"); };
    dark.addEventListener("change", follow);
    return () => dark.removeEventListener("change", follow);
  }, []);
  // After a navigation by the user, keyboard focus starts at the new page's content (not on the
  // first load: Tab then reaches "Skip to content" first).
  useEffect(() => {
    if (navigationType === NavigationType.Push) mainRef.current?.focus({ preventScroll: true });
  }, [location.pathname, navigationType]);

  const toastTimer = useRef<number | undefined>(undefined);
  const toast = useCallback((message: string) => {
    setToastText(message);
    window.clearTimeout(toastTimer.current);
    toastTimer.current = window.setTimeout(() => setToastText(""), 4000);
  }, []);
  const handle = useCallback((err: unknown) => {
    if (err instanceof api.ApiError && err.status === 401) {
      api.forget();
      setSession((n) => n + 1);
      navigate("/login");
      return;
    }
    if (isAbort(err)) return;
    if (err instanceof api.OfflineError) return;  // the offline banner says it, once
    console.error(err);
    toast(`Error: ${err instanceof Error ? err.message : String(err)}`);
  }, [navigate, toast]);
  const shell = useMemo<Shell>(() => ({ toast, handle }), [toast, handle]);

  const signOut = async (): Promise<void> => {
    await api.logout();
    setSession((n) => n + 1);
    navigate("/login");
  };
  const signedInNow = (): void => {
    setSession((n) => n + 1);
    const path = location.pathname;
    navigate(path === "/login" || path === "/" ? "/experiments" : `${path}${location.search}`);
  };
  const toggleTheme = (): void => {
    const next: Theme = theme === "dark" ? "light" : "dark";
    saveTheme(next);
    setTheme(next);
  };

  return (
    <ThemeContext.Provider value={theme}>
      <ShellContext.Provider value={shell}>
        <a className="skip" href="#main" onClick={(e) => { e.preventDefault(); mainRef.current?.focus(); }}>Skip to content</a>
        <header className="top">
          <Link className="brand" to="/experiments">Stalwart</Link>
          <nav aria-label="Main">
            {NAV.map(([id, label, pattern]) => (
              <Link key={id} id={id} to={`/${label.toLowerCase()}`} hidden={!signedIn}
                aria-current={signedIn && pattern.test(location.pathname) ? "page" : undefined}>{label}</Link>
            ))}
          </nav>
          <Link id="nav-admin" to="/admin/users" hidden={!signedIn || !admin}
            aria-current={signedIn && location.pathname.startsWith("/admin") ? "page" : undefined}>Admin</Link>
          <span className="spacer" />
          <span id="who" aria-live="polite">{signedIn ? `Signed in as ${api.username()}` : ""}</span>
          <Link id="nav-settings" to="/settings" hidden={!signedIn}
            aria-current={signedIn && location.pathname === "/settings" ? "page" : undefined}>Settings</Link>
          <button type="button" id="theme-toggle" aria-pressed={theme === "dark"} onClick={toggleTheme}
            aria-label={`Switch to the ${theme === "dark" ? "light" : "dark"} theme`}>
            {theme === "dark" ? "Light theme" : "Dark theme"}
          </button>
          <button type="button" id="sign-out" hidden={!signedIn} onClick={() => void signOut()}>Sign out</button>
        </header>
        {offline && (
          <div id="offline-banner" className="offline" role="status">
            Cannot reach the Stalwart master: check your network or whether the master is running.
            Retrying; what you see may be out of date.
          </div>
        )}
        <main id="main" tabIndex={-1} ref={mainRef}>
          {!signedIn ? <LoginPage onSignedIn={signedInNow} /> : (
            <Routes>
              <Route path="/" element={<Navigate to="/experiments" replace />} />
              <Route path="/login" element={<Navigate to="/experiments" replace />} />
              <Route path="/experiments" element={<ExperimentsPage />} />
              <Route path="/experiments/:id/:tab?" element={<ExperimentPage />} />
              <Route path="/trials/:id" element={<TrialPage />} />
              <Route path="/compare" element={<ComparePage />} />
              <Route path="/tasks" element={<TasksPage />} />
              <Route path="/cluster" element={<ClusterPage />} />
              <Route path="/webhooks" element={<WebhooksPage />} />
              <Route path="/templates" element={<TemplatesPage />} />
              <Route path="/settings" element={<SettingsPage />} />
              <Route path="/workspaces" element={<WorkspacesPage />} />
              <Route path="/workspaces/:id" element={<WorkspacePage />} />
              <Route path="/projects/:id" element={<ProjectPage />} />
              <Route path="/models" element={<ModelsPage />} />
              <Route path="/models/:name" element={<ModelPage />} />
              <Route path="/jobs" element={<JobsPage />} />
              <Route path="/admin/:section?" element={<AdminPage />} />
              <Route path="*" element={<NotFoundPage />} />
            </Routes>
          )}
        </main>
        <div id="toast" role="status" aria-live="polite">{toastText}</div>
      </ShellContext.Provider>
    </ThemeContext.Provider>
  );
}
