// The Tasks page's "Launch a JupyterLab notebook" form: POST /notebooks with a config of the
// description and resources.slots (0: CPU only, in the aux pool), an optional config template
// (picked from GET /templates: the ones the caller may read; sent as `templateName`, which the
// master merges under the config) and the workspace, as `det notebook start` sends them.
// `onLaunched` runs with the new notebook's id once the master took it (the page then shows
// it, and Open once it is ready). The templates are read when the form opens and again after
// a refused launch (a template deleted meanwhile leaves the picker).
import { useCallback, useEffect, useState } from "react";
import * as api from "../api";
import { useShell } from "../app";
import { LabelledSelect } from "./common";
import { Field, refusal } from "./Field";

const SLOTS: [string, string][] = [["0", "0 (CPU only)"], ["1", "1"], ["2", "2"], ["4", "4"], ["8", "8"]];

interface TemplateName { name: string; workspaceId: number }

export function LaunchNotebook({ onLaunched }: { onLaunched: (id: string) => void }) {
  const { toast, handle } = useShell();
  const [form, setForm] = useState({ description: "", slots: "0", template: "", workspace: "" });
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const [templates, setTemplates] = useState<TemplateName[]>([]);
  const set = (patch: Partial<typeof form>): void => setForm((f) => ({ ...f, ...patch }));

  const readTemplates = useCallback(async (signal?: AbortSignal): Promise<void> => {
    try {
      const answer = await api.get<{ templates?: TemplateName[] }>("/templates", signal);
      if (signal?.aborted) return;
      const found = answer.templates ?? [];
      setTemplates(found);
      setForm((f) => (f.template && !found.some((t) => t.name === f.template) ? { ...f, template: "" } : f));
    } catch (err) {
      if (!signal?.aborted) handle(err);
    }
  }, [handle]);
  useEffect(() => {
    const controller = new AbortController();
    void readTemplates(controller.signal);
    return () => controller.abort();
  }, [readTemplates]);

  const launch = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    setBusy(true);
    const config: Record<string, unknown> = { resources: { slots: Number(form.slots) } };
    if (form.description.trim()) config.description = form.description.trim();
    const ws = form.workspace.trim();
    try {
      const answer = await api.post<{ notebook: { id: string } }>("/notebooks", {
        config, ...(form.template ? { templateName: form.template } : {}),
        ...(ws ? { workspaceId: Number(ws) } : {}),
      });
      toast(`Launched notebook ${answer.notebook.id}; Open appears once it is ready`);
      set({ description: "" });
      onLaunched(answer.notebook.id);
    } catch (err) {
      const message = refusal(err, "launch the notebook");
      if (message) setError(message); else handle(err);
      void readTemplates();
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="notebook-new-title">
      <h2 id="notebook-new-title">Launch a JupyterLab notebook</h2>
      <form className="controls" id="notebook-form" aria-labelledby="notebook-new-title" onSubmit={(e) => void launch(e)}>
        <Field id="notebook-description" label="Description">
          <input id="notebook-description" name="description" type="text" size={20} value={form.description} onChange={(e) => set({ description: e.target.value })} />
        </Field>
        <LabelledSelect id="notebook-slots" label="Slots" value={form.slots} options={SLOTS} onChange={(slots) => set({ slots })} />
        <LabelledSelect id="notebook-template" label="Template" value={form.template} onChange={(template) => set({ template })}
          options={[["", "none"], ...templates.map((t): [string, string] => [t.name, `${t.name} (workspace ${t.workspaceId})`])]} />
        <Field id="notebook-workspace" label="Workspace ID">
          <input id="notebook-workspace" name="workspace" type="text" size={6} inputMode="numeric" placeholder="1" value={form.workspace} onChange={(e) => set({ workspace: e.target.value })} />
        </Field>
        <button type="submit" className="primary" disabled={busy}>Launch notebook</button>
      </form>
      <p className="error" role="alert" id="notebook-error">{error}</p>
    </section>
  );
}
