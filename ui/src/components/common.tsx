// Small pieces the pages share: labelled selects, state cells, summaries, document titles.
import { useEffect } from "react";
import { short } from "../format";

/** Options of a select: [value, text] pairs. */
export type Options = [string, string][];

interface SelectProps {
  id: string;
  label: string;
  options: Options;
  value: string;
  onChange: (value: string) => void;
}

/** A labelled <select>; a value that is not among the options shows the first option. */
export function LabelledSelect({ id, label, options, value, onChange }: SelectProps) {
  const shown = options.some(([v]) => v === value) ? value : (options[0]?.[0] ?? "");
  return (
    <span className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} name={id} value={shown} onChange={(e) => onChange(e.target.value)}>
        {options.map(([v, text]) => <option key={v} value={v}>{text}</option>)}
      </select>
    </span>
  );
}

/** A table cell showing a state (`STATE_ACTIVE` -> `ACTIVE`), coloured by it. */
export function StateCell({ state }: { state: string | null | undefined }) {
  const s = short(state);
  return <td className={`state state-${s}`}>{s}</td>;
}

/** A summary list: term and value pairs, each value with data-field = its term. */
export function Summary({ facts }: { facts: [string, string][] }) {
  return (
    <dl className="summary" id="summary">
      {facts.map(([k, v]) => [<dt key={`t-${k}`}>{k}</dt>, <dd key={`d-${k}`} data-field={k}>{v || "–"}</dd>])}
    </dl>
  );
}

/** Set the document's title while the page is shown. */
export function useTitle(title: string): void {
  useEffect(() => { document.title = title; }, [title]);
}

/** A table of `columns` labelled by the heading `labelledBy`. */
export function Table({ id, labelledBy, columns, children }: {
  id: string; labelledBy: string; columns: string[]; children: React.ReactNode;
}) {
  return (
    <div className="scroll">
      <table id={id} aria-labelledby={labelledBy}>
        <thead><tr>{columns.map((c) => <th key={c} scope="col">{c}</th>)}</tr></thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
