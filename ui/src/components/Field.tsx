import { useState } from "react";
import { useShell } from "../app";

// A labelled form field: the label above its control (the control's id is `id`).
export function Field({ id, label, children }: { id: string; label: string; children: React.ReactNode }) {
  return <span className="field"><label htmlFor={id}>{label}</label>{children}</span>;
}

/** The message of a refused call for a form's error line, or null when the shell must handle it
 * (a 401 goes to sign-in; anything that is not an API answer is a toast). */
export function refusal(err: unknown, what: string): string | null {
  const e = err as { status?: unknown; message?: unknown } | null;
  if (!e || typeof e.status !== "number" || e.status === 401) return null;
  const reason = typeof e.message === "string" ? e.message : "";
  return e.status === 403 ? `Not allowed to ${what}: ${reason}` : `Could not ${what}: ${reason}`;
}

/** An action runner for a form or a panel: `run(what, action, done)` clears the error line, calls
 * `action`, and either shows the master's refusal ("Not allowed to WHAT: ...") on the error line
 * or toasts `done` and calls `after`; true when it was done. */
export function useAction(after: () => void = () => undefined): {
  error: string; setError: (message: string) => void;
  run: (what: string, action: () => Promise<unknown>, done: string) => Promise<boolean>;
} {
  const { toast, handle } = useShell();
  const [error, setError] = useState("");
  const run = async (what: string, action: () => Promise<unknown>, done: string): Promise<boolean> => {
    setError("");
    try {
      await action();
    } catch (err) {
      const message = refusal(err, what);
      if (message) setError(message); else handle(err);
      return false;
    }
    toast(done);
    after();
    return true;
  };
  return { error, setError, run };
}
