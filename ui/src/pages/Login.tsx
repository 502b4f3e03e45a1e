// #/login: sign in with a master user; the token is kept in this tab's sessionStorage.
import { useEffect, useRef, useState } from "react";
import * as api from "../api";
import { useTitle } from "../components/common";

export function LoginPage({ onSignedIn }: { onSignedIn: () => void }) {
  useTitle("Sign in · Stalwart");
  const [user, setUser] = useState("admin");
  const [password, setPassword] = useState("");
  const [error, setError] = useState("");
  const userRef = useRef<HTMLInputElement>(null);
  useEffect(() => { userRef.current?.focus(); }, []);
  const submit = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    try {
      await api.login(user.trim(), password);
      onSignedIn();
    } catch (err) {
      const status = err instanceof api.ApiError ? err.status : 0;
      setError(status === 401 || status === 403 ? "Wrong username or password."
        : `Could not sign in: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  return (
    <form className="login" aria-labelledby="login-title" onSubmit={(e) => void submit(e)}>
      <h1 id="login-title">Sign in to Stalwart</h1>
      <label htmlFor="username">Username</label>
      <input id="username" name="username" autoComplete="username" required ref={userRef}
        value={user} onChange={(e) => setUser(e.target.value)} />
      <label htmlFor="password">Password</label>
      <input id="password" name="password" type="password" autoComplete="current-password"
        value={password} onChange={(e) => setPassword(e.target.value)} />
      <p className="error" role="alert">{error}</p>
      <button type="submit" className="primary">Sign in</button>
    </form>
  );
}
