// #/login: sign in with a master user; the token is kept in this tab's sessionStorage.
import * as api from "../api.js";
import { h, main } from "../dom.js";

export function loginPage() {
  document.title = "Sign in · Stalwart";
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
