// What the two places that show and change role assignments share: the Admin pages' roles of a
// user or a group (pages/AdminRoles.tsx: where each holds which role) and a workspace's page
// (pages/WorkspaceRoles.tsx: who holds which role there). The table of assignments, each with
// Remove or a hint where it is taken away, and the way an action runs: the master's refusal on
// the panel's error line, a toast when done, then the panel's refresh.
import { Table } from "./common";

/** The four roles one can give in a workspace: the wire's label (`PUT /workspaces/ID/roles/...`,
 * `GET /workspaces/ID/roles`) and the name the master lists them under (`POST /roles/search`). */
export const WORKSPACE_ROLES: [string, string][] = [
  ["viewer", "Viewer"], ["member", "Member"], ["editor", "Editor"], ["admin", "WorkspaceAdmin"],
];

/** The name of a role's wire label ("admin" -> "WorkspaceAdmin"; "none" stays "none"). */
export const roleName = (label: string): string => WORKSPACE_ROLES.find(([l]) => l === label)?.[1] ?? label;

/** One row: `key` goes to `data-key`, each cell to a `td[data-col]`; `remove` makes a Remove
 * button (its aria-label names what it takes), `hint` says where the role is taken away instead. */
export interface RoleRow {
  key: string;
  /** React's key when `key` may repeat (the same role in the same place, directly and through a group). */
  id?: string;
  cells: [string, string][];
  remove?: { label: string; run: () => void };
  hint?: string;
}

export function RoleTable({ id, labelledBy, columns, rows }: { id: string; labelledBy: string; columns: string[]; rows: RoleRow[] }) {
  return (
    <Table id={id} labelledBy={labelledBy} columns={[...columns, "Actions"]}>
      {rows.map((row) => (
        <tr key={row.id ?? row.key} data-key={row.key}>
          {row.cells.map(([col, text]) => <td key={col} data-col={col}>{text}</td>)}
          <td className="row-actions">
            {row.remove ? (
              <button type="button" data-action="remove-role" aria-label={row.remove.label} onClick={row.remove.run}>Remove</button>
            ) : row.hint ? <span className="hint">{row.hint}</span> : null}
          </td>
        </tr>
      ))}
    </Table>
  );
}

