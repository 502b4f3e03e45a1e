// The workspace page's role assignments: who holds which role in the workspace (users and user
// groups, GET /workspaces/ID/roles) and its default role (what every other user has there). The
// workspace's admins and cluster admins (GET /permissions/summary says whether the caller is one)
// give a role (PUT /workspaces/ID/roles/users/UID or /groups/GID {role}: it replaces the one held
// there), take one (DELETE of the same) and set the default (PUT /workspaces/ID/roles/default);
// anyone else is told they may only look. The table and the way actions run are shared with the
// Admin pages' roles (components/Roles.tsx). A user's roles everywhere are on the Admin pages.
import { useRef, useState } from "react";
import * as api from "../api";
import { usePoll } from "../app";
import { LabelledSelect } from "../components/common";
import { useAction } from "../components/Field";
import { RoleTable, WORKSPACE_ROLES, roleName, type RoleRow } from "../components/Roles";

interface Assignments {
  defaultRole: string;
  assignments?: { userId: number; username: string; role: string }[];
  groupAssignments?: { groupId: number; groupName: string; role: string }[];
}
interface Summary { assignments?: { roleId: number; scopeWorkspaceIds?: number[]; scopeCluster?: boolean }[] }

/** The workspace admin role's id in `/permissions/summary` (`policy.Role.ADMIN`). */
const WORKSPACE_ADMIN = 4;
const DEFAULT_ROLES: [string, string][] = [["none", "none (not even seen)"], ["viewer", "Viewer"], ["member", "Member"], ["editor", "Editor"]];

/** Whether the caller may change workspace `id`'s roles: a cluster admin or its admin. */
const manages = (summary: Summary, id: number): boolean =>
  (summary.assignments ?? []).some((a) => a.scopeCluster || (a.roleId >= WORKSPACE_ADMIN && (a.scopeWorkspaceIds ?? []).includes(id)));

export function WorkspaceRoles({ workspaceId, name }: { workspaceId: number; name: string }) {
  const [held, setHeld] = useState<Assignments | null>(null);
  const [canManage, setCanManage] = useState<boolean | null>(null);
  const [people, setPeople] = useState<[string, string][]>([]);
  const [who, setWho] = useState("");
  const [role, setRole] = useState("");
  const [defaultRole, setDefaultRole] = useState("");
  const peopleRead = useRef(false);  // users and groups are read once per visit, not every poll

  const refresh = usePoll(async (signal) => {
    const [roles, summary] = await Promise.all([
      api.get<Assignments>(`/workspaces/${workspaceId}/roles`, signal),
      api.get<Summary>("/permissions/summary", signal),
    ]);
    const manager = manages(summary, workspaceId);
    let found: [string, string][] | null = null;
    if (manager && !peopleRead.current) {
      // Who can be given a role: every user and group (read only by those who may give one).
      const [users, groups] = await Promise.all([
        api.get<{ users?: { id: number; username: string }[] }>("/users?sortBy=SORT_BY_USER_NAME", signal),
        api.call<{ groups?: { group: { groupId: number; name: string } }[] }>("POST", "/groups/search", { limit: 0 }, "omit", signal),
      ]);
      found = [
        ...(users.users ?? []).map((u): [string, string] => [`user:${u.id}`, u.username]),
        ...(groups.groups ?? []).map((g): [string, string] => [`group:${g.group.groupId}`, `group ${g.group.name}`]),
      ];
    }
    if (signal.aborted) return;
    setHeld(roles);
    setCanManage(manager);
    if (found) { peopleRead.current = true; setPeople(found); }
  }, `workspace-roles-${workspaceId}`);

  const { error, setError, run } = useAction(refresh);
  const base = `/workspaces/${workspaceId}/roles`;
  const rows: RoleRow[] = [
    ...(held?.assignments ?? []).map((a): RoleRow => ({
      key: `user:${a.username}`,
      cells: [["who", a.username], ["kind", "user"], ["role", roleName(a.role)]],
      ...(canManage ? { remove: { label: `Remove role ${roleName(a.role)} of ${a.username}`, run: () => void run(
        `take role ${roleName(a.role)} in ${name} from ${a.username}`, () => api.call("DELETE", `${base}/users/${a.userId}`),
        `${a.username} no longer has role ${roleName(a.role)} in ${name}`) } } : {}),
    })),
    ...(held?.groupAssignments ?? []).map((g): RoleRow => ({
      key: `group:${g.groupName}`,
      cells: [["who", g.groupName], ["kind", "group"], ["role", roleName(g.role)]],
      ...(canManage ? { remove: { label: `Remove role ${roleName(g.role)} of group ${g.groupName}`, run: () => void run(
        `take role ${roleName(g.role)} in ${name} from group ${g.groupName}`, () => api.call("DELETE", `${base}/groups/${g.groupId}`),
        `Group ${g.groupName} no longer has role ${roleName(g.role)} in ${name}`) } } : {}),
    })),
  ];

  const give = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const [kind, id] = who.split(":");
    const label = people.find(([v]) => v === who)?.[1];
    if (!kind || !id || !label) { setError("Pick the user or group to give a role to."); return; }
    if (!role) { setError("Pick the role to give."); return; }
    if (await run(`give role ${roleName(role)} in ${name} to ${label}`,
      () => api.call("PUT", `${base}/${kind === "user" ? "users" : "groups"}/${id}`, { role }),
      `${label} has role ${roleName(role)} in ${name}`)) {
      setWho("");
      setRole("");
    }
  };
  const saveDefault = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const chosen = defaultRole || held?.defaultRole || "";
    if (await run(`set the default role of ${name}`, () => api.call("PUT", `${base}/default`, { role: chosen }),
      `The default role in ${name} is ${roleName(chosen)}`)) setDefaultRole("");
  };

  return (
    <section id="workspace-roles" aria-labelledby="workspace-roles-title">
      <h2 id="workspace-roles-title">Roles in {name}</h2>
      {held && (
        <p id="workspace-default-role" data-role={held.defaultRole}>
          Everyone else: <strong>{roleName(held.defaultRole)}</strong> (the workspace&apos;s default role; a user&apos;s role is the
          highest of their own, their groups&apos; and this one).
        </p>
      )}
      {held === null ? <p className="muted">Reading the role assignments…</p> : rows.length === 0 ? (
        <p className="muted" id="workspace-roles-empty">Nobody has a role of their own here: everyone has the default role.</p>
      ) : (
        <RoleTable id="workspace-roles-table" labelledBy="workspace-roles-title" columns={["Who", "Kind", "Role"]} rows={rows} />
      )}
      {canManage === false && (
        <p className="hint" id="workspace-roles-refused" role="note">
          Only an admin of this workspace (or a cluster admin) can give or take roles here and change its default role;
          you can see who has which.
        </p>
      )}
      {canManage && (
        <>
          <form className="controls" id="workspace-roles-form" aria-label={`Give a role in ${name}`} onSubmit={(e) => void give(e)}>
            <LabelledSelect id="workspace-roles-who" label="User or group" value={who} options={[["", "Pick who"], ...people]}
              onChange={(v) => { setWho(v); setError(""); }} />
            <LabelledSelect id="workspace-roles-role" label="Role" value={role} options={[["", "Pick a role"], ...WORKSPACE_ROLES]} onChange={setRole} />
            <button type="submit" className="primary">Give role</button>
          </form>
          <form className="controls" id="workspace-default-form" aria-label={`Default role of ${name}`} onSubmit={(e) => void saveDefault(e)}>
            <LabelledSelect id="workspace-default-role-pick" label="Default role" value={defaultRole || held?.defaultRole || ""}
              options={DEFAULT_ROLES} onChange={setDefaultRole} />
            <button type="submit">Set default role</button>
          </form>
        </>
      )}
      <p className="error" role="alert" id="workspace-roles-error">{error}</p>
    </section>
  );
}
