// #/admin/users and #/admin/groups: the cluster's users and user groups, for admins (the header's
// Admin link shows only for them; anyone else opening the address is told only administrators
// manage users). Users: GET /users (by username; searched by name and paged, both kept in the
// address: ?q=&page=), POST /users (with a password), PATCH /users/ID {active}, {admin} or
// {displayName}, POST /users/ID/password; a user's Edit opens their panel (?user=ID: display name
// and roles, AdminRoles.tsx). Groups: POST /groups/search, POST /groups, GET /groups/ID
// (members), PUT /groups/ID {addUsers, removeUsers}, DELETE /groups/ID (after confirm), and the
// open group's roles. Every refusal is shown by the form or table it came from, with the master's
// reason (a taken username, the last active admin, a too short password, a role it lacks). The
// users table is read on load, after each action and when the tab is shown again (useRead), not
// on a timer.
import { useState } from "react";
import { Link, Navigate, useParams } from "react-router-dom";
import * as api from "../api";
import { isApiError, useHashQuery, usePoll, useRead, useShell } from "../app";
import { LabelledSelect, Table, useTitle } from "../components/common";
import { Field, refusal } from "../components/Field";
import { RolesPanel } from "./AdminRoles";
import "./admin.css";

interface User { id: number; username: string; displayName?: string | null; admin: boolean; active: boolean; remote?: boolean }
interface GroupRow { group: { groupId: number; name: string }; numMembers: number }
interface GroupDetails { groupId: number; name: string; users?: User[] }

/** The sections: [path segment, label]. */
const SECTIONS: [string, string][] = [["users", "Users"], ["groups", "Groups"]];

const yes = (b: boolean): string => (b ? "yes" : "no");

/** Users per page of the Users table. */
const PAGE_SIZE = 20;

/** The Users table's request: sorted by username, filtered by `q`, page `page` (from 0). */
const usersPath = (q: string, page: number): string => {
  const params = new URLSearchParams({ sortBy: "SORT_BY_USER_NAME", orderBy: "ORDER_BY_ASC", offset: String(page * PAGE_SIZE), limit: String(PAGE_SIZE) });
  if (q.trim()) params.set("name", q.trim());
  return `/users?${params.toString()}`;
};

/** Runs `action`; a refusal goes to `setError` (the shell handles a 401 or a network error). */
function useAction(setError: (message: string) => void) {
  const { handle } = useShell();
  return async (what: string, action: () => Promise<unknown>): Promise<boolean> => {
    setError("");
    try {
      await action();
      return true;
    } catch (err) {
      const message = refusal(err, what);
      if (message) setError(message); else handle(err);
      return false;
    }
  };
}

export function AdminPage() {
  const { section = "" } = useParams();
  useTitle("Admin · Stalwart");
  const [admin, setAdmin] = useState<boolean | null>(null);  // null until /me answers
  usePoll(async (signal) => {
    const answer = await api.get<{ user: User }>("/me", signal);
    if (!signal.aborted) setAdmin(Boolean(answer.user.admin));
    return false;
  }, "me");

  if (!SECTIONS.some(([path]) => path === section)) return <Navigate to="/admin/users" replace />;
  if (admin === null) return <h1 id="admin-title">Admin</h1>;
  if (!admin) {
    return (
      <>
        <h1 id="admin-title">Admin</h1>
        <p className="empty" id="admin-refused" role="alert">
          Only administrators can manage users and groups. Ask an administrator of this cluster
          to change your account or your groups.
        </p>
      </>
    );
  }
  return (
    <>
      <h1 id="admin-title">Admin</h1>
      <nav className="tabs" aria-label="Admin sections" id="admin-tabs">
        {SECTIONS.map(([path, label]) => (
          <Link key={path} to={`/admin/${path}`} data-tab={path} aria-current={path === section ? "page" : undefined}>{label}</Link>
        ))}
      </nav>
      {section === "users" ? <UsersSection /> : <GroupsSection />}
    </>
  );
}

function UsersSection() {
  const { toast } = useShell();
  const [query, setQuery] = useHashQuery((q) => { setSearch(q.get("q") ?? ""); setOpen(q.get("user") ?? ""); });
  const [search, setSearch] = useState(query.get("q") ?? "");
  const [open, setOpen] = useState(query.get("user") ?? "");  // the user whose panel shows
  const page = Math.max(0, Number(query.get("page") ?? "1") - 1) || 0;
  const [total, setTotal] = useState(0);
  const [users, setUsers] = useState<User[] | null>(null);
  const [form, setForm] = useState({ username: "", displayName: "", password: "", admin: false });
  const [reset, setReset] = useState({ user: "", password: "" });
  const [createError, setCreateError] = useState("");
  const [rowError, setRowError] = useState("");
  const [resetError, setResetError] = useState("");
  const create = useAction(setCreateError);
  const act = useAction(setRowError);
  const setPassword = useAction(setResetError);

  const q = query.get("q") ?? "";
  // read on load, after each action and when the tab is shown again, not on a timer
  const refresh = useRead(async (signal) => {
    const answer = await api.get<{ users?: User[]; pagination?: { total?: number } }>(usersPath(q, page), signal);
    if (signal.aborted) return;
    setUsers(answer.users ?? []);
    setTotal(answer.pagination?.total ?? 0);
  }, `users ${q} ${page}`);
  const go = (next: { q?: string; page?: number; user?: string }): void => {
    const user = next.user ?? open;
    const shown = (next.page ?? page) + 1;
    setQuery({ q: next.q ?? q, page: shown === 1 ? "" : String(shown), user });
    setOpen(user);
  };
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));

  const submit = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const username = form.username.trim();
    const ok = await create("create the user", () => api.post("/users", {
      user: { username, displayName: form.displayName.trim() || undefined, admin: form.admin, active: true },
      password: form.password,
    }));
    if (ok) {
      toast(`Created user ${username}`);
      setForm({ username: "", displayName: "", password: "", admin: false });
      refresh();
    }
  };
  const patch = async (u: User, body: { active?: boolean; admin?: boolean }, what: string, done: string): Promise<void> => {
    if (await act(`${what} ${u.username}`, () => api.call("PATCH", `/users/${u.id}`, body))) {
      toast(done);
      refresh();
    }
  };
  const submitReset = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const u = (users ?? []).find((x) => String(x.id) === reset.user);
    if (!u) { setResetError("Pick the user whose password to set."); return; }
    if (await setPassword(`set the password of ${u.username}`, () => api.post(`/users/${u.id}/password`, { password: reset.password }))) {
      toast(`The password of ${u.username} is changed; their sessions are signed out`);
      setReset({ user: "", password: "" });
    }
  };

  return (
    <>
      <h2 id="users-title">Users</h2>
      <form className="controls" id="users-search" role="search" aria-label="Search users"
        onSubmit={(e) => { e.preventDefault(); go({ q: search, page: 0 }); }}>
        <Field id="users-q" label="Search">
          <input id="users-q" type="search" size={18} placeholder="Username or display name" value={search}
            onChange={(e) => setSearch(e.target.value)} />
        </Field>
        <button type="submit">Search</button>
      </form>
      {users === null ? <p className="empty">Loading…</p> : users.length === 0 ? (
        <p className="empty" id="users-empty">{q ? `No user matches “${q}”.` : "No users."}</p>
      ) : (
        <Table id="users" labelledBy="users-title" columns={["Username", "Display name", "Admin", "Active", "Actions"]}>
          {users.map((u) => (
            <tr key={u.id} data-key={u.username} data-id={u.id}>
              <td data-col="username">{u.username}</td>
              <td data-col="displayName">{u.displayName ?? ""}</td>
              <td data-col="admin">{yes(u.admin)}</td>
              <td data-col="active">{yes(u.active)}</td>
              <td className="row-actions">
                <button type="button" data-action="active" aria-label={`${u.active ? "Deactivate" : "Activate"} ${u.username}`}
                  onClick={() => void patch(u, { active: !u.active }, u.active ? "deactivate" : "activate",
                    u.active ? `Deactivated ${u.username}: they can no longer sign in` : `Activated ${u.username}`)}>
                  {u.active ? "Deactivate" : "Activate"}
                </button>
                <button type="button" data-action="admin" aria-label={`${u.admin ? "Remove admin rights of" : "Make admin"} ${u.username}`}
                  onClick={() => void patch(u, { admin: !u.admin }, u.admin ? "remove admin rights of" : "make admin",
                    u.admin ? `${u.username} is no longer an admin` : `${u.username} is now an admin`)}>
                  {u.admin ? "Remove admin" : "Make admin"}
                </button>
                <button type="button" data-action="edit" aria-label={`Edit ${u.username}`} aria-pressed={String(u.id) === open}
                  onClick={() => go({ user: String(u.id) === open ? "" : String(u.id) })}>
                  Edit
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <nav className="pager" aria-label="Users pages" id="users-pager">
        <button type="button" disabled={page === 0} onClick={() => go({ page: page - 1 })}>Previous</button>
        <span id="users-range">
          {total === 0 ? "0 users" : `${page * PAGE_SIZE + 1}–${Math.min(total, (page + 1) * PAGE_SIZE)} of ${total} users`}
        </span>
        <button type="button" disabled={page + 1 >= pages} onClick={() => go({ page: page + 1 })}>Next</button>
      </nav>
      <p className="error" role="alert" id="users-error">{rowError}</p>
      {open && <UserPanel key={`${open} ${String((users ?? []).find((u) => String(u.id) === open)?.admin)}`} id={Number(open)} changed={refresh} close={() => go({ user: "" })} />}

      <h2 id="new-user-title">Create a user</h2>
      <form className="controls" id="user-form" aria-labelledby="new-user-title" onSubmit={(e) => void submit(e)}>
        <Field id="new-username" label="Username">
          <input id="new-username" type="text" required size={16} autoComplete="off" value={form.username}
            onChange={(e) => setForm((f) => ({ ...f, username: e.target.value }))} />
        </Field>
        <Field id="new-display-name" label="Display name">
          <input id="new-display-name" type="text" size={18} value={form.displayName}
            onChange={(e) => setForm((f) => ({ ...f, displayName: e.target.value }))} />
        </Field>
        <Field id="new-password" label="Password">
          <input id="new-password" type="password" size={16} autoComplete="new-password" value={form.password}
            onChange={(e) => setForm((f) => ({ ...f, password: e.target.value }))} />
        </Field>
        <label className="field" htmlFor="new-admin">
          <input id="new-admin" type="checkbox" checked={form.admin} onChange={(e) => setForm((f) => ({ ...f, admin: e.target.checked }))} />
          Admin
        </label>
        <button type="submit" className="primary">Create user</button>
      </form>
      <p className="error" role="alert" id="user-error">{createError}</p>

      <h2 id="reset-title">Set a user&rsquo;s password</h2>
      <form className="controls" id="reset-form" aria-labelledby="reset-title" onSubmit={(e) => void submitReset(e)}>
        <LabelledSelect id="reset-user" label="User" value={reset.user}
          options={[["", "Pick a user"], ...(users ?? []).map((u): [string, string] => [String(u.id), u.username])]}
          onChange={(v) => setReset((r) => ({ ...r, user: v }))} />
        <Field id="reset-password" label="New password">
          <input id="reset-password" type="password" size={16} autoComplete="new-password" value={reset.password}
            onChange={(e) => setReset((r) => ({ ...r, password: e.target.value }))} />
        </Field>
        <button type="submit" className="primary">Set password</button>
      </form>
      <p className="error" role="alert" id="reset-error">{resetError}</p>
    </>
  );
}

function GroupsSection() {
  const { toast } = useShell();
  const [query, setQuery] = useHashQuery((q) => setOpen(q.get("group") ?? ""));
  const [open, setOpen] = useState(query.get("group") ?? "");  // the group whose members show
  const [groups, setGroups] = useState<GroupRow[] | null>(null);
  const [details, setDetails] = useState<GroupDetails | null>(null);
  const [users, setUsers] = useState<User[]>([]);
  const [name, setName] = useState("");
  const [adding, setAdding] = useState("");
  const [createError, setCreateError] = useState("");
  const [rowError, setRowError] = useState("");
  const [memberError, setMemberError] = useState("");
  const create = useAction(setCreateError);
  const act = useAction(setRowError);
  const member = useAction(setMemberError);

  const refresh = usePoll(async (signal) => {
    const [found, people] = await Promise.all([
      api.call<{ groups?: GroupRow[] }>("POST", "/groups/search", { limit: 0 }, "omit", signal),
      api.get<{ users?: User[] }>("/users?sortBy=SORT_BY_USER_NAME&orderBy=ORDER_BY_ASC", signal),
    ]);
    const shown = open && (found.groups ?? []).some((g) => String(g.group.groupId) === open)
      ? (await api.get<{ group: GroupDetails }>(`/groups/${open}`, signal)).group : null;
    if (signal.aborted) return;
    setGroups(found.groups ?? []);
    setUsers(people.users ?? []);
    setDetails(shown);
  }, `groups ${open}`);

  const show = (id: string): void => { setOpen(id); setQuery(id ? { group: id } : {}); setMemberError(""); };
  const submit = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    const wanted = name.trim();
    if (await create("create the group", () => api.post("/groups", { name: wanted }))) {
      toast(`Created group ${wanted}`);
      setName("");
      refresh();
    }
  };
  const remove = async (g: GroupRow): Promise<void> => {
    if (!window.confirm(`Delete group ${g.group.name}? Its members lose the roles given to it.`)) return;
    if (await act(`delete group ${g.group.name}`, () => api.call("DELETE", `/groups/${g.group.groupId}`))) {
      toast(`Deleted group ${g.group.name}`);
      if (String(g.group.groupId) === open) show("");
      refresh();
    }
  };
  const change = async (body: { addUsers?: number[]; removeUsers?: number[] }, what: string, done: string): Promise<void> => {
    if (!details) return;
    if (await member(what, () => api.call("PUT", `/groups/${details.groupId}`, { groupId: details.groupId, ...body }))) {
      toast(done);
      setAdding("");
      refresh();
    }
  };
  const members = details?.users ?? [];
  const outside = users.filter((u) => !members.some((m) => m.id === u.id));

  return (
    <>
      <h2 id="groups-title">Groups</h2>
      {groups === null ? <p className="empty">Loading…</p> : groups.length === 0 ? (
        <p className="empty" id="groups-empty">No user groups yet: create one below.</p>
      ) : (
        <Table id="groups" labelledBy="groups-title" columns={["Name", "Members", "Actions"]}>
          {groups.map((g) => (
            <tr key={g.group.groupId} data-key={g.group.name} data-id={g.group.groupId}
              aria-current={String(g.group.groupId) === open ? "true" : undefined}>
              <td data-col="name">{g.group.name}</td>
              <td data-col="members">{g.numMembers}</td>
              <td className="row-actions">
                <button type="button" data-action="members" aria-label={`Members of ${g.group.name}`}
                  aria-pressed={String(g.group.groupId) === open} onClick={() => show(String(g.group.groupId) === open ? "" : String(g.group.groupId))}>
                  Members
                </button>
                <button type="button" data-action="delete" aria-label={`Delete group ${g.group.name}`} onClick={() => void remove(g)}>Delete</button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <p className="error" role="alert" id="groups-error">{rowError}</p>

      {details && (
        <section id="group-members" aria-labelledby="members-title" data-group={details.name}>
          <h2 id="members-title">Members of {details.name}</h2>
          {members.length === 0 ? <p className="empty">No members yet.</p> : (
            <ul className="members">
              {members.map((m) => (
                <li key={m.id} data-key={m.username}>
                  {m.displayName ? `${m.displayName} (${m.username})` : m.username}{" "}
                  <button type="button" data-action="remove-member" aria-label={`Remove ${m.username} from ${details.name}`}
                    onClick={() => void change({ removeUsers: [m.id] }, `remove ${m.username} from ${details.name}`, `Removed ${m.username} from ${details.name}`)}>
                    Remove
                  </button>
                </li>
              ))}
            </ul>
          )}
          <form className="controls" id="member-form" aria-label={`Add a member to ${details.name}`}
            onSubmit={(e) => {
              e.preventDefault();
              const u = outside.find((x) => String(x.id) === adding);
              if (!u) { setMemberError("Pick the user to add."); return; }
              void change({ addUsers: [u.id] }, `add ${u.username} to ${details.name}`, `Added ${u.username} to ${details.name}`);
            }}>
            <LabelledSelect id="member-add" label="User" value={adding}
              options={[["", "Pick a user"], ...outside.map((u): [string, string] => [String(u.id), u.username])]} onChange={setAdding} />
            <button type="submit" className="primary">Add member</button>
          </form>
          <p className="error" role="alert" id="members-error">{memberError}</p>
          <RolesPanel holder={{ kind: "group", id: details.groupId, name: details.name }} after={() => undefined} />
        </section>
      )}

      <h2 id="new-group-title">Create a group</h2>
      <form className="controls" id="group-form" aria-labelledby="new-group-title" onSubmit={(e) => void submit(e)}>
        <Field id="new-group-name" label="Name">
          <input id="new-group-name" type="text" required size={18} value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <button type="submit" className="primary">Create group</button>
      </form>
      <p className="error" role="alert" id="group-error">{createError}</p>
    </>
  );
}

/** One user's panel (?user=ID): their display name, and their roles. */
function UserPanel({ id, changed, close }: { id: number; changed: () => void; close: () => void }) {
  const { toast } = useShell();
  const [u, setU] = useState<User | null>(null);
  const [missing, setMissing] = useState(false);
  const [name, setName] = useState("");
  const [error, setError] = useState("");
  const [password, setPassword] = useState("");
  const [passwordError, setPasswordError] = useState("");
  const save = useAction(setError);
  const savePassword = useAction(setPasswordError);
  const refresh = usePoll(async (signal) => {
    const answer = await api.get<{ user: User }>(`/users/${id}`, signal).catch((err: unknown) => {
      if (isApiError(err, 404)) return null;
      throw err;
    });
    if (signal.aborted) return;
    if (answer === null) { setMissing(true); return false; }
    setU(answer.user);
    setName(answer.user.displayName ?? "");
    return false;
  }, String(id));
  if (missing) {
    return (
      <section id="user-panel">
        <p className="empty" id="user-missing">There is no user {id}. <button type="button" onClick={close}>Close</button></p>
      </section>
    );
  }
  if (!u) return <section id="user-panel"><p className="empty">Loading…</p></section>;
  const submit = async (event: React.FormEvent): Promise<void> => {
    event.preventDefault();
    if (await save(`rename ${u.username}`, () => api.call("PATCH", `/users/${u.id}`, { displayName: name.trim() }))) {
      toast(name.trim() ? `${u.username} is now shown as ${name.trim()}` : `${u.username} has no display name now`);
      refresh();
      changed();
    }
  };
  return (
    <section id="user-panel" aria-labelledby="user-panel-title" data-user={u.username}>
      <h2 id="user-panel-title">{u.displayName ? `${u.displayName} (${u.username})` : u.username}</h2>
      <form className="controls" id="display-name-form" aria-label={`Display name of ${u.username}`} onSubmit={(e) => void submit(e)}>
        <Field id="edit-display-name" label="Display name">
          <input id="edit-display-name" type="text" size={20} value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <button type="submit" className="primary">Save name</button>
        <button type="button" onClick={close}>Close</button>
      </form>
      <p className="error" role="alert" id="display-name-error">{error}</p>
      <form className="controls" id="panel-password-form" aria-label={`Password of ${u.username}`}
        onSubmit={(e) => {
          e.preventDefault();
          void savePassword(`set the password of ${u.username}`, () => api.post(`/users/${u.id}/password`, { password })).then((ok) => {
            if (!ok) return;
            toast(`The password of ${u.username} is changed; their sessions are signed out`);
            setPassword("");
          });
        }}>
        <Field id="panel-password" label={`New password for ${u.username}`}>
          <input id="panel-password" type="password" size={16} autoComplete="new-password" value={password}
            onChange={(e) => setPassword(e.target.value)} />
        </Field>
        <button type="submit" className="primary">Set password</button>
      </form>
      <p className="error" role="alert" id="panel-password-error">{passwordError}</p>
      <RolesPanel holder={{ kind: "user", id: u.id, name: u.username, admin: u.admin }} after={() => { refresh(); changed(); }} />
    </section>
  );
}
