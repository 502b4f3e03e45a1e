// The Stalwart UI: a hash router (#/login, #/experiments, #/experiments/ID, #/trials/ID,
// #/tasks, #/cluster, #/webhooks), the theme toggle, and sign out. Each page polls the REST API and updates
// in place.
import * as api from "./api.js";
import { main, newPage } from "./dom.js";
import { clusterPage } from "./pages/cluster.js";
import { experimentPage } from "./pages/experiment.js";
import { experimentsPage } from "./pages/experiments.js";
import { loginPage } from "./pages/login.js";
import { tasksPage } from "./pages/tasks.js";
import { trialPage } from "./pages/trial.js";
import { webhooksPage } from "./pages/webhooks.js";

let routed = false;
const NAV = [["nav-experiments", /^#\/(experiments|trials)/], ["nav-tasks", /^#\/tasks/],
  ["nav-cluster", /^#\/cluster/], ["nav-webhooks", /^#\/webhooks/]];

function route() {
  const hash = location.hash || "#/experiments";
  const path = hash.split("?")[0];
  const signedIn = Boolean(api.token());
  document.getElementById("sign-out").hidden = !signedIn;
  document.getElementById("who").textContent = signedIn ? `Signed in as ${api.username()}` : "";
  for (const [id, pattern] of NAV) {
    const link = document.getElementById(id);
    link.hidden = !signedIn;
    if (signedIn && pattern.test(path)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  newPage();
  if (!signedIn || path === "#/login") {
    if (signedIn) { location.hash = "#/experiments"; return; }
    loginPage();
    return;
  }
  let match;
  if ((match = path.match(/^#\/experiments\/(\d+)$/))) experimentPage(Number(match[1]));
  else if ((match = path.match(/^#\/trials\/(\d+)$/))) trialPage(Number(match[1]));
  else if (path === "#/cluster") clusterPage();
  else if (path === "#/tasks") tasksPage();
  else if (path === "#/webhooks") webhooksPage();
  else experimentsPage();
  // After a navigation, keyboard focus starts at the new page's content (not on the first
  // load: Tab then reaches "Skip to content" first).
  if (routed) main.focus({ preventScroll: true });
  routed = true;
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
// Filters change the hash's query with history.replaceState, which fires no hashchange; a hash
// typed or linked (query included) re-routes, and the page reads its filters from it.
window.addEventListener("hashchange", route);
route();
