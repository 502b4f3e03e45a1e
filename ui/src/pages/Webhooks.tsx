// #/webhooks: the webhooks the caller may manage (GET /webhooks), a form that creates one
// (POST /webhooks: URL, name, type, workspace or global, experiment states, log regex) and, per
// row, Test (POST /webhooks/ID/test) and Delete (DELETE /webhooks/ID, after confirm).
import { useState } from "react";
import * as api from "../api";
import { usePoll, useShell } from "../app";
import { LabelledSelect, Table, useTitle } from "../components/common";

const EMPTY = "No webhooks you can manage yet: create one below or with `stw webhook create`.";

interface Trigger { triggerType?: string; condition?: { state?: string; regex?: string } }
interface Webhook { id: number; name?: string; url: string; webhookType?: string; mode?: string; workspaceId?: number | null; triggers?: Trigger[] }

/** A trigger for people: "state COMPLETED" or "log /regex/". */
export function triggerText(t: Trigger): string {
  const c = t.condition ?? {};
  return c.regex !== undefined ? `log /${c.regex}/` : `state ${c.state ?? ""}`;
}

const labelOf = (w: Webhook): string => `webhook ${w.id}${w.name ? ` (${w.name})` : ""}`;

function Field({ id, label, children }: { id: string; label: string; children: React.ReactNode }) {
  return <span className="field"><label htmlFor={id}>{label}</label>{children}</span>;
}

export function WebhooksPage() {
  useTitle("Webhooks · Stalwart");
  const { toast, handle } = useShell();
  const [items, setItems] = useState<Webhook[] | null>(null);
  const [form, setForm] = useState({ url: "", name: "", type: "WEBHOOK_TYPE_DEFAULT", workspace: "", states: "COMPLETED, ERROR", regex: "" });
  const [error, setError] = useState("");
  const set = (patch: Partial<typeof form>): void => setForm((f) => ({ ...f, ...patch }));

  const refresh = usePoll(async (signal) => {
    const answer = await api.get<{ webhooks?: Webhook[] }>("/webhooks", signal);
    if (!signal.aborted) setItems(answer.webhooks ?? []);
  }, "webhooks");

  const test = async (w: Webhook): Promise<void> => {
    try {
      await api.post(`/webhooks/${w.id}/test`);
      toast(`The receiver of ${labelOf(w)} took the test event`);
    } catch (err) { handle(err); }
  };
  const remove = async (w: Webhook): Promise<void> => {
    if (!window.confirm(`Delete ${labelOf(w)}?`)) return;
    try {
      await api.call("DELETE", `/webhooks/${w.id}`);
      toast(`Deleted ${labelOf(w)}`);
      refresh();
    } catch (err) { handle(err); }
  };
  const create = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    const triggers: Trigger[] = form.states.split(",").map((s) => s.trim().toUpperCase()).filter(Boolean)
      .map((state) => ({ triggerType: "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", condition: { state } }));
    if (form.regex) triggers.push({ triggerType: "TRIGGER_TYPE_TASK_LOG", condition: { regex: form.regex } });
    const ws = form.workspace.trim();
    try {
      const answer = await api.post<{ webhook: Webhook }>("/webhooks", {
        url: form.url.trim(), name: form.name.trim(), webhookType: form.type,
        mode: "WEBHOOK_MODE_WORKSPACE", workspaceId: ws ? Number(ws) : null, triggers,
      });
      toast(`Created ${labelOf(answer.webhook)}`);
      set({ url: "", name: "", regex: "" });
      refresh();
    } catch (err) {
      if (err instanceof api.ApiError && err.status !== 401) setError(`Could not create the webhook: ${err.message}`);
      else handle(err);
    }
  };

  const list = items ?? [];
  return (
    <>
      <h1 id="webhooks-title">Webhooks</h1>
      <p className="muted">Where the master posts experiment state changes and matching task log lines (signed; see docs/webhooks.md).</p>
      <p id="webhooks-count" className="muted" aria-live="polite">{items ? `${list.length} webhook${list.length === 1 ? "" : "s"}` : ""}</p>
      <Table id="webhooks" labelledBy="webhooks-title" columns={["ID", "Name", "Type", "Scope", "Triggers", "URL", "Actions"]}>
        {list.map((w) => {
          const scope = w.workspaceId ? `workspace ${w.workspaceId}` : "global";
          return (
            <tr key={w.id} data-key={w.id}>
              <td className="id">{w.id}</td><td>{w.name ?? ""}</td>
              <td>{w.webhookType === "WEBHOOK_TYPE_SLACK" ? "Slack" : "JSON"}</td>
              <td>{w.mode === "WEBHOOK_MODE_SPECIFIC" ? `${scope}, named experiments` : scope}</td>
              <td>{(w.triggers ?? []).map(triggerText).join(", ")}</td>
              <td className="mono">{w.url}</td>
              <td>
                <div className="actions">
                  <button type="button" data-action="test" aria-label={`Test ${labelOf(w)}`} onClick={() => void test(w)}>Test</button>
                  <button type="button" className="danger" data-action="delete" aria-label={`Delete ${labelOf(w)}`} onClick={() => void remove(w)}>Delete</button>
                </div>
              </td>
            </tr>
          );
        })}
      </Table>
      {items && list.length === 0 && <p className="empty">{EMPTY}</p>}
      <h2 id="webhook-new-title">New webhook</h2>
      <form className="controls" id="webhook-form" aria-labelledby="webhook-new-title" onSubmit={(e) => void create(e)}>
        <Field id="webhook-url" label="URL">
          <input id="webhook-url" name="url" type="text" required placeholder="https://example.com/hook" size={36}
            value={form.url} onChange={(e) => set({ url: e.target.value })} />
        </Field>
        <Field id="webhook-name" label="Name">
          <input id="webhook-name" name="name" type="text" size={14} value={form.name} onChange={(e) => set({ name: e.target.value })} />
        </Field>
        <LabelledSelect id="webhook-type" label="Type" value={form.type} onChange={(type) => set({ type })}
          options={[["WEBHOOK_TYPE_DEFAULT", "JSON"], ["WEBHOOK_TYPE_SLACK", "Slack"]]} />
        <Field id="webhook-workspace" label="Workspace ID">
          <input id="webhook-workspace" name="workspace" type="text" size={6} inputMode="numeric" placeholder="global"
            value={form.workspace} onChange={(e) => set({ workspace: e.target.value })} />
        </Field>
        <Field id="webhook-states" label="Experiment states">
          <input id="webhook-states" name="states" type="text" size={18} value={form.states} onChange={(e) => set({ states: e.target.value })} />
        </Field>
        <Field id="webhook-regex" label="Log regex">
          <input id="webhook-regex" name="regex" type="text" size={18} value={form.regex} onChange={(e) => set({ regex: e.target.value })} />
        </Field>
        <button type="submit" className="primary">Create webhook</button>
      </form>
      <p className="error" role="alert" id="webhook-error">{error}</p>
    </>
  );
}
