// The roles of one user or one user group, on the Admin pages: where each role is given (a
// workspace, or cluster-wide: for a user that is the admin flag, the only cluster-wide role
// Stalwart has), with Remove, and a form that gives one. Reads GET /roles/search (the four
// workspace roles), GET /workspaces, GET /roles/search/by-user/ID (with the roles a user has
// through their groups, which are taken away on the group) or /by-group/ID; writes POST
// /roles/add-assignments and /roles/remove-assignments, and PATCH /users/ID {admin} for the
// cluster-wide one. Every refusal shows the master's reason under the form.
import { useState } from "react";
import * as api from "../api";
import { usePoll } from "../app";
import { LabelledSelect } from "../components/common";
import { useAction } from "../components/Field";
import { RoleTable } from "../components/Roles";

interface Role { roleId: number; name?: string | null }
interface Assignment { role: Role; scopeWorkspaceId?: number | null }
interface UserRoles {
  roles?: { role: Role; userRoleAssignments?: { userId: number; roleAssignment: Assignment }[];
    groupRoleAssignments?: { groupId: number; roleAssignment: Assignment }[] }[];
}
interface GroupRoles { roles?: Role[]; assignments?: { roleId: number; scopeWorkspaceIds?: number[] }[] }
interface Workspace { id: number; name: string; archived?: boolean }

/** Whose roles: a user (with their admin flag) or a group. */
export type Holder = { kind: "user"; id: number; name: string; admin: boolean } | { kind: "group"; id: number; name: string };

/** One row of the table: a role somewhere, given directly or through a group. */
interface Row { roleId: number; role: string; workspaceId: number | null; through: string }

const CLUSTER = "cluster";
const CLUSTER_ADMIN = "ClusterAdmin";

export function RolesPanel({ holder, after }: { holder: Holder; after: () => void }) {
  const [roles, setRoles] = useState<Role[]>([]);
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [rows, setRows] = useState<Row[] | null>(null);
  const [scope, setScope] = useState("");
  const [roleId, setRoleId] = useState("");
  const key = `${holder.kind} ${holder.id} ${holder.kind === "user" ? String(holder.admin) : ""}`;

  const refresh = usePoll(async (signal) => {
    const [all, spaces, groups] = await Promise.all([
      api.call<{ roles?: Role[] }>("POST", "/roles/search", { limit: 0 }, "omit", signal),
      api.get<{ workspaces?: Workspace[] }>("/workspaces?archived=false", signal),
      api.call<{ groups?: { group: { groupId: number; name: string } }[] }>("POST", "/groups/search", { limit: 0 }, "omit", signal),
    ]);
    const groupName = new Map((groups.groups ?? []).map((g) => [g.group.groupId, g.group.name]));
    const found: Row[] = [];
    if (holder.kind === "user") {
      if (holder.admin) found.push({ roleId: 0, role: CLUSTER_ADMIN, workspaceId: null, through: "" });
      const answer = await api.get<UserRoles>(`/roles/search/by-user/${holder.id}`, signal);
      for (const r of answer.roles ?? []) {
        for (const a of r.userRoleAssignments ?? []) {
          found.push({ roleId: r.role.roleId, role: r.role.name ?? String(r.role.roleId), workspaceId: a.roleAssignment.scopeWorkspaceId ?? null, through: "" });
        }
        for (const a of r.groupRoleAssignments ?? []) {
          found.push({ roleId: r.role.roleId, role: r.role.name ?? String(r.role.roleId), workspaceId: a.roleAssignment.scopeWorkspaceId ?? null, through: groupName.get(a.groupId) ?? `group ${a.groupId}` });
        }
      }
    } else {
      const answer = await api.get<GroupRoles>(`/roles/search/by-group/${holder.id}`, signal);
      const names = new Map((answer.roles ?? []).map((r) => [r.roleId, r.name ?? String(r.roleId)]));
      for (const a of answer.assignments ?? []) {
        for (const w of a.scopeWorkspaceIds ?? []) found.push({ roleId: a.roleId, role: names.get(a.roleId) ?? String(a.roleId), workspaceId: w, through: "" });
      }
    }
    if (signal.aborted) return;
    setRoles(all.roles ?? []);
    setWorkspaces(spaces.workspaces ?? []);
    setRows(found);
    return false;
  }, key);

  const place = (id: number | null): string =>
    id === null ? "Cluster-wide" : (workspaces.find((w) => w.id === id)?.name ?? `workspace ${id}`);
  const body = (rid: number, workspaceId: number) => {
    const roleAssignment = { role: { roleId: rid }, scopeWorkspaceId: workspaceId };
    return holder.kind === "user"
      ? { userRoleAssignments: [{ userId: holder.id, roleAssignment }] }
      : { groupRoleAssignments: [{ groupId: holder.id, roleAssignment }] };
  };
  const { error, setError, run } = useAction(() => { refresh(); after(); });
  const remove = (row: Row): void => {
    if (row.workspaceId === null) {
      void run(`remove admin rights of ${holder.name}`, () => api.call("PATCH", `/users/${holder.id}`, { admin: false }),
        `${holder.name} is no longer a cluster admin`);
      return;
    }
    void run(`take role ${row.role} in ${place(row.workspaceId)} from ${holder.name}`,
      () => api.post("/roles/remove-assignments", body(row.roleId, row.workspaceId ?? 0)),
      `${holder.name} no longer has role ${row.role} in ${place(row.workspaceId)}`);
  };
  const clusterWide = scope === CLUSTER;
  const give = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (!scope) { setError("Pick where to give the role: a workspace, or cluster-wide."); return; }
    if (clusterWide) {
      if (holder.kind !== "user") return;
      if (await run(`make ${holder.name} a cluster admin`, () => api.call("PATCH", `/users/${holder.id}`, { admin: true }),
        `${holder.name} is now a cluster admin`)) setScope("");
      return;
    }
    const role = roles.find((r) => String(r.roleId) === roleId);
    if (!role) { setError("Pick the role to give."); return; }
    const where = place(Number(scope));
    if (await run(`give role ${role.name ?? role.roleId} in ${where} to ${holder.name}`, () => api.post("/roles/add-assignments", body(role.roleId, Number(scope))),
      `${holder.name} has role ${role.name ?? role.roleId} in ${where}`)) {
      setScope("");
      setRoleId("");
    }
  };
  const prefix = `${holder.kind}-roles`;
  const scopes: [string, string][] = [["", "Pick where"], ...(holder.kind === "user" ? [[CLUSTER, "Cluster-wide"] as [string, string]] : []),
    ...workspaces.map((w): [string, string] => [String(w.id), w.name])];
  const roleOptions: [string, string][] = clusterWide
    ? [["", CLUSTER_ADMIN]]
    : [["", "Pick a role"], ...roles.map((r): [string, string] => [String(r.roleId), r.name ?? String(r.roleId)])];

  return (
    <section id={prefix} aria-labelledby={`${prefix}-title`} data-holder={holder.name}>
      <h3 id={`${prefix}-title`}>Roles of {holder.name}</h3>
      {rows === null ? <p className="empty">Loading…</p> : rows.length === 0 ? (
        <p className="empty" id={`${prefix}-empty`}>No roles: {holder.name} has only each workspace&apos;s default role.</p>
      ) : (
        <RoleTable id={`${prefix}-table`} labelledBy={`${prefix}-title`} columns={["Role", "Where", "Given"]}
          rows={rows.map((row) => {
            const where = place(row.workspaceId);
            return {
              key: `${row.role}@${where}`,
              id: `${row.role} ${row.workspaceId ?? CLUSTER} ${row.through}`,
              cells: [["role", row.role], ["where", where], ["through", row.through ? `through group ${row.through}` : "directly"]],
              ...(row.through
                ? { hint: `Remove it on group ${row.through}` }
                : { remove: { label: `Remove role ${row.role} in ${where} from ${holder.name}`, run: () => remove(row) } }),
            };
          })} />
      )}
      <form className="controls" id={`${prefix}-form`} aria-label={`Give ${holder.name} a role`} onSubmit={(e) => void give(e)}>
        <LabelledSelect id={`${prefix}-scope`} label="Where" value={scope} options={scopes} onChange={(v) => { setScope(v); setError(""); }} />
        <LabelledSelect id={`${prefix}-role`} label="Role" value={clusterWide ? "" : roleId} options={roleOptions} onChange={setRoleId} />
        <button type="submit" className="primary">Give role</button>
      </form>
      {holder.kind === "group" && (
        <p className="hint" id="group-roles-note">
          Groups get roles in workspaces: Stalwart has no cluster-wide group role (the cluster-wide
          role is a user&apos;s admin flag).
        </p>
      )}
      <p className="error" role="alert" id={`${prefix}-error`}>{error}</p>
    </section>
  );
}
