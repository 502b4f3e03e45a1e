// #/webhooks: the webhooks the caller may manage (GET /webhooks), a form that creates one
// (POST /webhooks: URL, name, type, workspace or global, experiment states, log regex) and, per
// row, Test (POST /webhooks/ID/test) and Delete (DELETE /webhooks/ID, after confirm).
import * as api from "../api.js";
import { h, handle, labelledSelect, main, poll, setText, syncRows, table, toast } from "../dom.js";

const EMPTY = "No webhooks you can manage yet: create one below or with `stw webhook create`.";

const field = (id, label, input) => h("span", { class: "field" }, h("label", { for: id }, label), input);

/** A trigger for people: "state COMPLETED" or "log /regex/". */
export function triggerText(t) {
  const c = t.condition || {};
  return c.regex !== undefined ? `log /${c.regex}/` : `state ${c.state}`;
}

export function webhooksPage() {
  document.title = "Webhooks · Stalwart";
  const { table: t, tbody } = table("webhooks", "webhooks-title",
    ["ID", "Name", "Type", "Scope", "Triggers", "URL", "Actions"]);
  const count = h("p", { id: "webhooks-count", class: "muted", "aria-live": "polite" });
  const empty = h("p", { class: "empty", hidden: true }, EMPTY);

  const url = h("input", { id: "webhook-url", name: "url", type: "text", required: true,
    placeholder: "https://example.com/hook", size: 36 });
  const name = h("input", { id: "webhook-name", name: "name", type: "text", size: 14 });
  const kind = labelledSelect("webhook-type", "Type",
    [["WEBHOOK_TYPE_DEFAULT", "JSON"], ["WEBHOOK_TYPE_SLACK", "Slack"]], "WEBHOOK_TYPE_DEFAULT");
  const workspace = h("input", { id: "webhook-workspace", name: "workspace", type: "text", size: 6,
    inputmode: "numeric", placeholder: "global" });
  const states = h("input", { id: "webhook-states", name: "states", type: "text", size: 18,
    value: "COMPLETED, ERROR" });
  const regex = h("input", { id: "webhook-regex", name: "regex", type: "text", size: 18 });
  const error = h("p", { class: "error", role: "alert", id: "webhook-error" });
  const form = h("form", { class: "controls", id: "webhook-form", "aria-labelledby": "webhook-new-title" },
    field("webhook-url", "URL", url), field("webhook-name", "Name", name), kind.box,
    field("webhook-workspace", "Workspace ID", workspace),
    field("webhook-states", "Experiment states", states), field("webhook-regex", "Log regex", regex),
    h("button", { type: "submit", class: "primary" }, "Create webhook"));

  main.replaceChildren(h("h1", { id: "webhooks-title" }, "Webhooks"),
    h("p", { class: "muted" }, "Where the master posts experiment state changes and matching task log lines (signed; see docs/webhooks.md)."),
    count, h("div", { class: "scroll" }, t), empty,
    h("h2", { id: "webhook-new-title" }, "New webhook"), form, error);

  const label = (w) => `webhook ${w.id}${w.name ? ` (${w.name})` : ""}`;

  const test = async (w) => {
    try {
      await api.post(`/webhooks/${w.id}/test`);
      toast(`The receiver of ${label(w)} took the test event`);
    } catch (err) { handle(err); }
  };
  const remove = async (w) => {
    if (!window.confirm(`Delete ${label(w)}?`)) return;
    try {
      await api.call("DELETE", `/webhooks/${w.id}`);
      toast(`Deleted ${label(w)}`);
      await refresh();
    } catch (err) { handle(err); }
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const triggers = states.value.split(",").map((s) => s.trim().toUpperCase()).filter(Boolean)
      .map((state) => ({ triggerType: "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", condition: { state } }));
    if (regex.value) triggers.push({ triggerType: "TRIGGER_TYPE_TASK_LOG", condition: { regex: regex.value } });
    const ws = workspace.value.trim();
    try {
      const answer = await api.post("/webhooks", {
        url: url.value.trim(), name: name.value.trim(), webhookType: kind.select.value,
        mode: "WEBHOOK_MODE_WORKSPACE", workspaceId: ws ? Number(ws) : null, triggers,
      });
      toast(`Created ${label(answer.webhook)}`);
      url.value = ""; name.value = ""; regex.value = "";
      await refresh();
    } catch (err) {
      if (err instanceof api.ApiError && err.status !== 401) error.textContent = `Could not create the webhook: ${err.message}`;
      else handle(err);
    }
  });

  const refresh = async () => {
    const items = (await api.get("/webhooks")).webhooks || [];
    empty.hidden = items.length > 0;
    setText(count, `${items.length} webhook${items.length === 1 ? "" : "s"}`);
    syncRows(tbody, items, (w) => String(w.id), (w) => {
      const testButton = h("button", { type: "button", "data-action": "test", "aria-label": `Test ${label(w)}`,
        onclick: () => test(w) }, "Test");
      const del = h("button", { type: "button", class: "danger", "data-action": "delete",
        "aria-label": `Delete ${label(w)}`, onclick: () => remove(w) }, "Delete");
      return h("tr", {}, h("td", { class: "id" }), h("td", {}), h("td", {}), h("td", {}), h("td", {}),
        h("td", { class: "mono" }), h("td", {}, h("div", { class: "actions" }, testButton, del)));
    }, (row, w) => {
      const c = row.cells;
      setText(c[0], String(w.id));
      setText(c[1], w.name || "");
      setText(c[2], w.webhookType === "WEBHOOK_TYPE_SLACK" ? "Slack" : "JSON");
      const scope = w.workspaceId ? `workspace ${w.workspaceId}` : "global";
      setText(c[3], w.mode === "WEBHOOK_MODE_SPECIFIC" ? `${scope}, named experiments` : scope);
      setText(c[4], (w.triggers || []).map(triggerText).join(", "));
      setText(c[5], w.url);
    });
  };
  poll(refresh);
}
