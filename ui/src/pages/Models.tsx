// #/models: the model registry (GET /models): the models the caller may see, filtered by name
// (a substring, any case) and label, archived ones only when asked (all three kept in the hash:
// #/models?q=mnist&label=prod&archived=1), newest change first, with a form that creates a model
// (POST /models: name, description, comma-separated labels, workspace id).
import { useEffect, useState } from "react";
import { Link } from "react-router-dom";
import * as api from "../api";
import { useHashQuery, usePoll, useShell } from "../app";
import { Table, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";
import { when } from "../format";

export interface Model {
  id: number; name: string; description?: string; notes?: string; metadata?: Record<string, unknown>;
  labels?: string[]; creationTime?: string; lastUpdatedTime?: string; numVersions?: number;
  username?: string; workspaceId?: number; archived?: boolean;
}

interface Filters { q: string; label: string; archived: boolean }
const filtersOf = (q: URLSearchParams): Filters => ({ q: q.get("q") ?? "", label: q.get("label") ?? "", archived: q.get("archived") === "1" });

/** Comma-separated labels as a list (trimmed, empty ones dropped). */
export const labelList = (text: string): string[] => text.split(",").map((l) => l.trim()).filter(Boolean);

export function ModelsPage() {
  useTitle("Models · Stalwart");
  const { toast, handle } = useShell();
  const [query, setQuery] = useHashQuery((q) => setFilters(filtersOf(q)));
  const [filters, setFilters] = useState<Filters>(() => filtersOf(query));
  const [applied, setApplied] = useState(filters);
  const [items, setItems] = useState<Model[] | null>(null);
  const [form, setForm] = useState({ name: "", description: "", labels: "", workspace: "" });
  const [error, setError] = useState("");

  useEffect(() => {
    setQuery({ q: filters.q, label: filters.label, archived: filters.archived ? "1" : "" });
    const timer = window.setTimeout(() => setApplied(filters), 250);
    return () => window.clearTimeout(timer);
  }, [filters, setQuery]);

  const refresh = usePoll(async (signal) => {
    const qs = new URLSearchParams({ sortBy: "SORT_BY_LAST_UPDATED_TIME", orderBy: "ORDER_BY_DESC" });
    if (applied.q.trim()) qs.set("name", applied.q.trim());
    if (applied.label.trim()) qs.append("labels", applied.label.trim());
    if (!applied.archived) qs.set("archived", "false");
    const answer = await api.get<{ models?: Model[] }>(`/models?${qs.toString()}`, signal);
    if (!signal.aborted) setItems(answer.models ?? []);
  }, JSON.stringify(applied));

  const create = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    setError("");
    const ws = form.workspace.trim();
    try {
      const answer = await api.post<{ model: Model }>("/models", {
        name: form.name.trim(), description: form.description.trim(), labels: labelList(form.labels),
        ...(ws ? { workspaceId: Number(ws) } : {}),
      });
      toast(`Created model ${answer.model.name}`);
      setForm({ name: "", description: "", labels: "", workspace: "" });
      refresh();
    } catch (err) {
      const message = refusal(err, "create the model");
      if (message) setError(message); else handle(err);
    }
  };

  const set = (patch: Partial<Filters>): void => setFilters((f) => ({ ...f, ...patch }));
  const filtered = Boolean(applied.q.trim() || applied.label.trim());
  const list = items ?? [];
  return (
    <>
      <h1 id="models-title">Models</h1>
      <form className="filters" role="search" aria-label="Filter models" onSubmit={(e) => e.preventDefault()}>
        <Field id="model-filter-text" label="Name contains">
          <input id="model-filter-text" type="search" size={18} value={filters.q} onChange={(e) => set({ q: e.target.value })} />
        </Field>
        <Field id="model-filter-label" label="Label">
          <input id="model-filter-label" type="text" size={12} value={filters.label} onChange={(e) => set({ label: e.target.value })} />
        </Field>
        <label className="field"><input type="checkbox" id="model-filter-archived" checked={filters.archived}
          onChange={(e) => set({ archived: e.target.checked })} />Show archived</label>
      </form>
      <p id="models-count" className="muted" aria-live="polite">
        {items ? `${list.length} model${list.length === 1 ? "" : "s"}${filtered ? " match the filters" : ""}` : ""}
      </p>
      <Table id="models" labelledBy="models-title" columns={["ID", "Name", "Description", "Labels", "Versions", "Owner", "Workspace", "Last updated"]}>
        {list.map((m) => (
          <tr key={m.id} data-key={m.id}>
            <td className="num">{m.id}</td>
            <td><Link to={`/models/${encodeURIComponent(m.name)}`}>{m.name}</Link>{m.archived ? <span className="muted"> (archived)</span> : null}</td>
            <td>{m.description ?? ""}</td>
            <td>{(m.labels ?? []).join(", ")}</td>
            <td className="num">{m.numVersions ?? 0}</td>
            <td>{m.username ?? ""}</td>
            <td className="num">{m.workspaceId ?? ""}</td>
            <td>{when(m.lastUpdatedTime)}</td>
          </tr>
        ))}
      </Table>
      {items && list.length === 0 && (
        <p className="empty">{filtered ? "No model matches these filters." : "No models yet: create one below or with `det model create NAME`."}</p>
      )}
      <h2 id="model-new-title">New model</h2>
      <form className="controls" id="model-form" aria-labelledby="model-new-title" onSubmit={(e) => void create(e)}>
        <Field id="model-name" label="Name">
          <input id="model-name" name="name" type="text" required size={18} value={form.name} onChange={(e) => setForm((f) => ({ ...f, name: e.target.value }))} />
        </Field>
        <Field id="model-description" label="Description">
          <input id="model-description" name="description" type="text" size={24} value={form.description} onChange={(e) => setForm((f) => ({ ...f, description: e.target.value }))} />
        </Field>
        <Field id="model-labels" label="Labels (comma-separated)">
          <input id="model-labels" name="labels" type="text" size={18} value={form.labels} onChange={(e) => setForm((f) => ({ ...f, labels: e.target.value }))} />
        </Field>
        <Field id="model-workspace" label="Workspace ID">
          <input id="model-workspace" name="workspace" type="text" size={6} inputMode="numeric" placeholder="1" value={form.workspace} onChange={(e) => setForm((f) => ({ ...f, workspace: e.target.value }))} />
        </Field>
        <button type="submit" className="primary">Create model</button>
      </form>
      <p className="error" role="alert" id="model-error">{error}</p>
    </>
  );
}
