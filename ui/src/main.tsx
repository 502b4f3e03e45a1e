// The Stalwart UI: a hash router (#/login, #/experiments, #/experiments/ID, #/trials/ID, #/tasks,
// #/cluster, #/webhooks) inside the shell (header, theme toggle, sign out, toasts).
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { HashRouter } from "react-router-dom";
import { App } from "./App";

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <HashRouter future={{ v7_startTransition: true, v7_relativeSplatPath: true }}>
        <App />
      </HashRouter>
    </StrictMode>,
  );
}
