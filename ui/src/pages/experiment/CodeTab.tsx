// The experiment page's Code tab: the model definition as uploaded, a file tree
// (GET /api/v1/experiments/ID/file_tree) and the picked file's text
// (POST /api/v1/experiments/ID/file, base64; secrets masked by the master).
import { useState } from "react";
import * as api from "../../api";
import { usePoll } from "../../app";
import "../../components/debug.css";

/** `v1FileNode`: a file or folder of the model definition. */
export interface FileNode { path: string; name: string; isDir: boolean; contentLength?: number; files?: FileNode[] }

/** Decode base64 to text (UTF-8; bytes that are not are shown as U+FFFD). */
export function decodeBase64(b64: string): string {
  const bin = atob(b64);
  const bytes = Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The first file of the tree, depth first (what is shown before a pick). */
export function firstFile(nodes: FileNode[]): string {
  for (const n of nodes) {
    if (!n.isDir) return n.path;
    const inner = firstFile(n.files ?? []);
    if (inner) return inner;
  }
  return "";
}

function Tree({ nodes, open, onOpen }: { nodes: FileNode[]; open: string; onOpen: (path: string) => void }) {
  return (
    <ul>
      {nodes.map((n) => (
        <li key={n.path} data-path={n.path}>
          {n.isDir ? (
            <>
              <span className="muted">{n.name}/</span>
              <Tree nodes={n.files ?? []} open={open} onOpen={onOpen} />
            </>
          ) : (
            <button type="button" aria-current={n.path === open ? "true" : undefined} onClick={() => onOpen(n.path)}>{n.name}</button>
          )}
        </li>
      ))}
    </ul>
  );
}

export function CodeTab({ id }: { id: number }) {
  const [tree, setTree] = useState<FileNode[] | null>(null);
  const [open, setOpen] = useState("");
  const [text, setText] = useState<string | null>(null);
  usePoll(async (signal) => {
    const answer = await api.get<{ files?: FileNode[] }>(`/experiments/${id}/file_tree`, signal);
    if (signal.aborted) return;
    const files = answer.files ?? [];
    setTree(files);
    if (!open) setOpen(firstFile(files));
    return false;  // the model definition never changes
  }, String(id));
  usePoll(async (signal) => {
    if (!open) return false;
    setText(null);
    const answer = await api.call<{ file?: string }>("POST", `/experiments/${id}/file`, { path: open }, "omit", signal);
    if (!signal.aborted) setText(decodeBase64(answer.file ?? ""));
    return false;
  }, `${id} ${open}`);
  if (tree === null) return <p className="muted">Reading the model definition…</p>;
  if (tree.length === 0) return <p className="empty" id="code-empty">This experiment has no model definition stored.</p>;
  return (
    <>
      <h2 id="code-title">Model definition</h2>
      <div className="code-view">
        <nav aria-label="Files of the model definition" className="file-tree" id="file-tree">
          <Tree nodes={tree} open={open} onOpen={setOpen} />
        </nav>
        <section aria-labelledby="file-title">
          <h3 id="file-title" className="mono">{open}</h3>
          <pre className="config" id="file-content" aria-busy={text === null}>{text ?? ""}</pre>
        </section>
      </div>
    </>
  );
}
