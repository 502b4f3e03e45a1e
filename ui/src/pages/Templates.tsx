// #/templates: the config templates the caller may read (GET /templates), each viewed as YAML
// (#/templates?name=NAME), and a form that creates one (POST /templates/NAME with its workspace)
// or replaces an existing one's config (PATCH /templates/NAME, the config as the body); Delete
// (DELETE /templates/NAME) after confirm; Rename edits the name in its row
// (PATCH /template/rename {oldName, newName}). The YAML is parsed here: a config that is not a
// mapping is refused before it is sent.
import { useState } from "react";
import { dump, load } from "js-yaml";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { Table, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";
import "./templates.css";

const EMPTY = "No templates you can read yet: create one below or with `det template create NAME FILE`.";

export interface Template { name: string; config: Record<string, unknown>; workspaceId: number }

/** A template's config as YAML (keys in the order stored). */
export const toYaml = (config: unknown): string => dump(config ?? {}, { sortKeys: false, lineWidth: -1 });

/** The YAML typed into the form as a config mapping, or an error message. */
export function parseConfig(text: string): Record<string, unknown> | string {
  let value: unknown;
  try { value = load(text); } catch (err) { return `The config is not YAML: ${err instanceof Error ? err.message : String(err)}`; }
  if (value === null || value === undefined) return {};
  if (typeof value !== "object" || Array.isArray(value)) return "The config must be a mapping (key: value lines).";
  return value as Record<string, unknown>;
}

export function TemplatesPage() {
  useTitle("Templates · Stalwart");
  const { toast, handle } = useShell();
  const [query, setQuery] = useHashQuery();
  const shown = query.get("name") ?? "";
  const [items, setItems] = useState<Template[] | null>(null);
  const [form, setForm] = useState({ name: "", workspace: "", yaml: "" });
  const [error, setError] = useState("");
  const [renaming, setRenaming] = useState<{ from: string; to: string } | null>(null);
  const [renameError, setRenameError] = useState("");
  const set = (patch: Partial<typeof form>): void => setForm((f) => ({ ...f, ...patch }));

  const refresh = usePoll(async (signal) => {
    const answer = await api.get<{ templates?: Template[] }>("/templates", signal);
    if (!signal.aborted) setItems(answer.templates ?? []);
  }, "templates");

  const list = items ?? [];
  const selected = list.find((t) => t.name === shown);
  const existing = list.find((t) => t.name === form.name.trim());

  const edit = (t: Template): void => {
    setForm({ name: t.name, workspace: String(t.workspaceId), yaml: toYaml(t.config) });
    setError("");
    document.getElementById("template-name")?.focus();
  };
  const remove = async (t: Template): Promise<void> => {
    if (!window.confirm(`Delete template ${t.name}?`)) return;
    try {
      await api.call("DELETE", `/templates/${encodeURIComponent(t.name)}`);
      toast(`Deleted template ${t.name}`);
      if (shown === t.name) setQuery({});
      refresh();
    } catch (err) {
      const message = refusal(err, `delete template ${t.name}`);
      if (message) setError(message); else handle(err);
    }
  };
  const rename = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!renaming) return;
    const { from } = renaming;
    const to = renaming.to.trim();
    setRenameError("");
    if (!to) { setRenameError("A template needs a name."); return; }
    try {
      await api.call("PATCH", "/template/rename", { oldName: from, newName: to });
      toast(`Renamed template ${from} to ${to}`);
      setRenaming(null);
      if (shown === from) setQuery({ name: to });
      if (form.name.trim() === from) set({ name: to });
      refresh();
    } catch (err) {
      const message = refusal(err, `rename template ${from}`);
      if (message) setRenameError(message); else handle(err);
    }
  };
  const save = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    const name = form.name.trim();
    const config = parseConfig(form.yaml);
    if (typeof config === "string") { setError(config); return; }
    const path = `/templates/${encodeURIComponent(name)}`;
    const ws = form.workspace.trim();
    try {
      if (existing) await api.call("PATCH", path, config);
      else await api.post(path, { name, config, workspaceId: ws ? Number(ws) : 0 });
      toast(`${existing ? "Updated" : "Created"} template ${name}`);
      setQuery({ name });
      refresh();
    } catch (err) {
      const message = refusal(err, `save template ${name}`);
      if (message) setError(message); else handle(err);
    }
  };

  return (
    <>
      <h1 id="templates-title">Templates</h1>
      <p className="muted">Config fragments an experiment or task starts from (<code>--template NAME</code>); its own config wins where both set a key.</p>
      <p id="templates-count" className="muted" aria-live="polite">{items ? `${list.length} template${list.length === 1 ? "" : "s"}` : ""}</p>
      <Table id="templates" labelledBy="templates-title" columns={["Name", "Workspace", "Keys", "Actions"]}>
        {list.map((t) => (
          <tr key={t.name} data-key={t.name} data-selected={t.name === shown || undefined}>
            <td>
              {renaming?.from === t.name
                ? (
                  <form className="rename" id="template-rename" aria-label={`Rename template ${t.name}`} onSubmit={(e) => void rename(e)}>
                    <input aria-label={`New name for template ${t.name}`} required size={16} value={renaming.to} autoFocus
                      onChange={(e) => setRenaming({ from: t.name, to: e.target.value })}
                      onKeyDown={(e) => { if (e.key === "Escape") { setRenaming(null); setRenameError(""); } }} />
                    <button type="submit" className="primary">Save name</button>
                    <button type="button" onClick={() => { setRenaming(null); setRenameError(""); }}>Cancel</button>
                  </form>
                )
                : t.name}
            </td>
            <td className="id">{t.workspaceId}</td>
            <td>{Object.keys(t.config).join(", ")}</td>
            <td>
              <div className="actions">
                <button type="button" data-action="view" aria-label={`View template ${t.name}`} onClick={() => setQuery({ name: t.name })}>View</button>
                <button type="button" data-action="edit" aria-label={`Edit template ${t.name}`} onClick={() => edit(t)}>Edit</button>
                <button type="button" data-action="rename" aria-label={`Rename template ${t.name}`} onClick={() => { setRenameError(""); setRenaming({ from: t.name, to: t.name }); }}>Rename</button>
                <button type="button" className="danger" data-action="delete" aria-label={`Delete template ${t.name}`} onClick={() => void remove(t)}>Delete</button>
              </div>
            </td>
          </tr>
        ))}
      </Table>
      <p className="error" role="alert" id="template-rename-error">{renameError}</p>
      {items && list.length === 0 && <p className="empty">{EMPTY}</p>}
      {shown && items && (
        <section aria-labelledby="template-shown-title">
          <h2 id="template-shown-title">{selected ? `Template ${selected.name}` : "Template not found"}</h2>
          {selected
            ? <pre className="config" id="template-yaml">{toYaml(selected.config)}</pre>
            : <p id="template-missing">There is no template named “{shown}” that you can read.</p>}
        </section>
      )}
      <h2 id="template-form-title">{existing ? `Update template ${existing.name}` : "New template"}</h2>
      <form id="template-form" aria-labelledby="template-form-title" onSubmit={(e) => void save(e)}>
        <div className="controls">
          <Field id="template-name" label="Name">
            <input id="template-name" name="name" type="text" required size={20} value={form.name} onChange={(e) => set({ name: e.target.value })} />
          </Field>
          <Field id="template-workspace" label="Workspace ID">
            <input id="template-workspace" name="workspace" type="text" size={6} inputMode="numeric" placeholder="1"
              disabled={Boolean(existing)} value={existing ? String(existing.workspaceId) : form.workspace} onChange={(e) => set({ workspace: e.target.value })} />
          </Field>
        </div>
        <Field id="template-config" label="Config (YAML)">
          <textarea id="template-config" name="config" rows={10} cols={60} spellCheck={false} className="mono"
            value={form.yaml} onChange={(e) => set({ yaml: e.target.value })} />
        </Field>
        <p><button type="submit" className="primary">{existing ? "Update template" : "Create template"}</button></p>
      </form>
      <p className="error" role="alert" id="template-error">{error}</p>
    </>
  );
}
