// Saved views of the experiments list: a name for the column set, sort, filters and page size,
// kept in the user's web settings on the master (`GET|POST /users/setting`, storage path
// `experiments-views`, one setting per view: key = the name, value = the view as JSON; an empty
// value removes it, as Determined's settings do), so they follow the user to any browser.
import { useCallback, useEffect, useState } from "react";
import * as api from "../api";
import { useShell } from "../app";

export const VIEWS_PATH = "experiments-views";

/** What a view restores: the hash query of the list (columns, sort, filters, page size). */
export type View = Record<string, string>;

interface Setting { key: string; value?: string | null; storagePath?: string | null }

/** The saved views' picker: apply one, save the current list under a name, delete one. */
export function SavedViews({ current, apply }: { current: View; apply: (view: View, name: string) => void }) {
  const { toast, handle } = useShell();
  const [views, setViews] = useState<Map<string, View>>(new Map());
  const [chosen, setChosen] = useState(current.view ?? "");
  const [name, setName] = useState("");

  const load = useCallback(async () => {
    const answer = await api.get<{ settings?: Setting[] }>("/users/setting");
    const found = new Map<string, View>();
    for (const s of answer.settings ?? []) {
      if (s.storagePath !== VIEWS_PATH || !s.value) continue;
      try { found.set(s.key, JSON.parse(s.value) as View); } catch { /* not ours */ }
    }
    setViews(found);
  }, []);
  useEffect(() => { load().catch(handle); }, [load, handle]);
  useEffect(() => { setChosen(current.view ?? ""); }, [current.view]);

  const store = async (key: string, value: string): Promise<void> => {
    await api.post("/users/setting", { settings: [{ key, value, storagePath: VIEWS_PATH }] });
    await load();
  };
  const save = async (): Promise<void> => {
    const n = name.trim();
    if (!n) return;
    const kept: View = Object.fromEntries(Object.entries(current).filter(([k, v]) => v && k !== "view" && k !== "page"));
    try {
      await store(n, JSON.stringify(kept));
      setChosen(n);
      setName("");
      apply(kept, n);
      toast(`View "${n}" saved`);
    } catch (err) { handle(err); }
  };
  const remove = async (): Promise<void> => {
    if (!chosen || !window.confirm(`Delete the saved view "${chosen}"?`)) return;
    try {
      await store(chosen, "");
      toast(`View "${chosen}" deleted`);
      setChosen("");
    } catch (err) { handle(err); }
  };
  const pick = (n: string): void => {
    setChosen(n);
    const view = views.get(n);
    if (view) apply(view, n);
  };
  const names = [...views.keys()].sort((a, b) => a.localeCompare(b));
  return (
    <div className="views" role="group" aria-label="Views of the list">
      <span className="field">
        <label htmlFor="view-pick">Saved view</label>
        <select id="view-pick" value={views.has(chosen) ? chosen : ""} onChange={(e) => pick(e.target.value)}>
          <option value="">(none)</option>
          {names.map((n) => <option key={n} value={n}>{n}</option>)}
        </select>
      </span>
      <button type="button" id="view-delete" disabled={!views.has(chosen)} onClick={() => void remove()}>Delete view</button>
      <form className="inline" onSubmit={(e) => { e.preventDefault(); void save(); }}>
        <label htmlFor="view-name">Save as</label>
        <input id="view-name" type="text" size={14} value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit" id="view-save" disabled={!name.trim()}>Save view</button>
      </form>
    </div>
  );
}
