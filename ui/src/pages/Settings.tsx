// #/settings: the signed-in user's own settings (GET /me): the display name (PATCH /users/ID
// {displayName}; empty clears it) and the password (POST /users/ID/password). A password change
// first checks the current password (a sign-in that keeps no cookie, whose session is ended at
// once) and that the new one was typed twice alike; the master ends every other session of
// the user and keeps this one.
import { useState } from "react";
import * as api from "../api";
import { usePoll, useShell } from "../app";
import { Summary, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";

interface Me { id: number; username: string; displayName?: string | null; admin?: boolean }

export function SettingsPage() {
  useTitle("Settings · Stalwart");
  const { toast, handle } = useShell();
  const [me, setMe] = useState<Me | null>(null);
  const [name, setName] = useState<string | null>(null);  // null: not edited, shows the stored one
  const [pw, setPw] = useState({ current: "", next: "", again: "" });
  const [nameError, setNameError] = useState("");
  const [pwError, setPwError] = useState("");

  const refresh = usePoll(async (signal) => {
    const answer = await api.get<{ user: Me }>("/me", signal);
    if (!signal.aborted) setMe(answer.user);
    return false;
  }, "me");

  const saveName = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!me) return;
    setNameError("");
    const displayName = (name ?? me.displayName ?? "").trim();
    try {
      await api.call("PATCH", `/users/${me.id}`, { displayName });
      toast(displayName ? `Your display name is now ${displayName}` : "Your display name is cleared");
      setName(null);
      refresh();
    } catch (err) {
      const message = refusal(err, "change the display name");
      if (message) setNameError(message); else handle(err);
    }
  };
  const savePassword = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!me) return;
    setPwError("");
    if (pw.next !== pw.again) { setPwError("The new password and its repetition differ."); return; }
    try {
      const check = await api.call<{ token: string }>("POST", "/auth/login", { username: me.username, password: pw.current });
      // End the checking session at once (best effort): it was only a proof of the password.
      await fetch("/api/v1/auth/logout", { method: "POST", credentials: "omit", headers: { Authorization: `Bearer ${check.token}` } }).catch(() => undefined);
    } catch (err) {
      if (err instanceof api.ApiError && err.status === 401) { setPwError("The current password is wrong."); return; }
      handle(err);
      return;
    }
    try {
      await api.post(`/users/${me.id}/password`, { password: pw.next });
      toast("Your password is changed; your other sessions are signed out");
      setPw({ current: "", next: "", again: "" });
    } catch (err) {
      const message = refusal(err, "change the password");
      if (message) setPwError(message); else handle(err);
    }
  };

  return (
    <>
      <h1 id="settings-title">Settings</h1>
      {me && <Summary facts={[["Username", me.username], ["Display name", me.displayName ?? ""], ["Role", me.admin ? "admin" : "user"]]} />}
      <h2 id="name-title">Display name</h2>
      <form className="controls" id="name-form" aria-labelledby="name-title" onSubmit={(e) => void saveName(e)}>
        <Field id="display-name" label="Display name">
          <input id="display-name" name="displayName" type="text" size={24} maxLength={255} disabled={!me}
            value={name ?? me?.displayName ?? ""} onChange={(e) => setName(e.target.value)} />
        </Field>
        <button type="submit" className="primary" disabled={!me}>Save display name</button>
      </form>
      <p className="error" role="alert" id="name-error">{nameError}</p>
      <h2 id="password-title">Password</h2>
      <form className="controls" id="password-form" aria-labelledby="password-title" onSubmit={(e) => void savePassword(e)}>
        <Field id="password-current" label="Current password">
          <input id="password-current" name="current" type="password" autoComplete="current-password" size={18}
            value={pw.current} onChange={(e) => setPw((p) => ({ ...p, current: e.target.value }))} />
        </Field>
        <Field id="password-new" label="New password">
          <input id="password-new" name="new" type="password" autoComplete="new-password" size={18} required
            value={pw.next} onChange={(e) => setPw((p) => ({ ...p, next: e.target.value }))} />
        </Field>
        <Field id="password-again" label="New password again">
          <input id="password-again" name="again" type="password" autoComplete="new-password" size={18} required
            value={pw.again} onChange={(e) => setPw((p) => ({ ...p, again: e.target.value }))} />
        </Field>
        <button type="submit" className="primary" disabled={!me}>Change password</button>
      </form>
      <p className="error" role="alert" id="password-error">{pwError}</p>
    </>
  );
}
