// A hand-written SVG line chart: one path per series, axes with round ticks, a hover that
// names the nearest series and point, and a legend whose buttons highlight a series.
const SVG = "http://www.w3.org/2000/svg";
export const PALETTE = [
  "#1f77b4", "#e8590c", "#2f9e44", "#d6336c", "#7048e8",
  "#8c564b", "#c2255c", "#0c8599", "#a9a9a9", "#e67700",
];

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (parent) parent.appendChild(node);
  return node;
}

/** About `count` round tick values covering [lo, hi]. */
export function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
}

export function fmt(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

/**
 * Draw `series` ([{id, label, xs, ys}]) into `container` (cleared first).
 * Each line is a <path class="series" data-series-id data-points> (and data-trial-id when
 * `trials`, the default: one line per trial); `legendLabel` names the legend for screen readers.
 */
export function lineChart(container, series, {
  xLabel = "batches", yLabel = "", log = false, trials = true, legendLabel = "Trials in the chart",
  width = 900, height = 360,
} = {}) {
  container.replaceChildren();
  const m = { l: 64, r: 16, t: 12, b: 40 };
  const xs = series.flatMap((s) => s.xs);
  // Log scale (base 10) when asked and every value is positive.
  const useLog = log && series.every((s) => s.ys.every((y) => y > 0));
  const ty = useLog ? Math.log10 : (y) => y;
  const ys = series.flatMap((s) => s.ys.map(ty));
  if (xs.length === 0) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = "No data reported yet.";
    container.appendChild(p);
    return;
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const sx = (x) => m.l + ((x - x0) / (x1 - x0)) * (width - m.l - m.r);
  const sy = (y) => height - m.b - ((ty(y) - y0) / (y1 - y0)) * (height - m.t - m.b);
  const syRaw = (v) => height - m.b - ((v - y0) / (y1 - y0)) * (height - m.t - m.b);

  const svg = el("svg", {
    viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img",
    "aria-label": `${yLabel} against ${xLabel}, ${series.length} ${trials ? "trials" : "lines"}`,
    preserveAspectRatio: "none",
  });
  const axes = el("g", { class: "axis" }, svg);
  for (const t of ticks(y0, y1)) {
    el("line", { class: "grid", x1: m.l, x2: width - m.r, y1: syRaw(t), y2: syRaw(t) }, axes);
    el("text", { x: m.l - 6, y: syRaw(t) + 4, "text-anchor": "end" }, axes).textContent = fmt(useLog ? 10 ** t : t);
  }
  for (const t of ticks(x0, x1, 8)) {
    el("line", { class: "grid", x1: sx(t), x2: sx(t), y1: m.t, y2: height - m.b }, axes);
    el("text", { x: sx(t), y: height - m.b + 16, "text-anchor": "middle" }, axes).textContent = fmt(t);
  }
  el("text", { x: (m.l + width - m.r) / 2, y: height - 6, "text-anchor": "middle" }, axes).textContent = xLabel;
  el("text", { x: 14, y: (m.t + height - m.b) / 2, "text-anchor": "middle",
               transform: `rotate(-90 14 ${(m.t + height - m.b) / 2})` }, axes).textContent = useLog ? `${yLabel} (log)` : yLabel;

  const lines = new Map();
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const d = s.xs.map((x, j) => `${j ? "L" : "M"}${sx(x).toFixed(1)},${sy(s.ys[j]).toFixed(1)}`).join("");
    const path = el("path", {
      class: "series", d, stroke: color, "data-series-id": s.id, "data-points": s.xs.length,
    }, svg);
    if (trials) path.setAttribute("data-trial-id", s.id);
    el("title", {}, path).textContent = s.label;
    if (s.xs.length === 1) {  // a single point draws no line: show a dot
      el("circle", { cx: sx(s.xs[0]), cy: sy(s.ys[0]), r: 3, fill: color, "data-series-id": s.id }, svg);
    }
    lines.set(String(s.id), { path, color, s });
  });
  const marker = el("circle", { class: "marker", r: 5, visibility: "hidden" }, svg);

  const wrap = document.createElement("div");
  wrap.className = "chart-wrap";
  const tip = document.createElement("div");
  tip.className = "tooltip";
  tip.hidden = true;
  tip.setAttribute("role", "status");
  wrap.append(svg, tip);

  const focus = (id) => {
    svg.classList.toggle("has-focus", id !== null);
    for (const [key, { path }] of lines) path.classList.toggle("focused", key === String(id));
  };
  const show = (entry, j) => {
    const { s, color } = entry;
    marker.setAttribute("cx", sx(s.xs[j]));
    marker.setAttribute("cy", sy(s.ys[j]));
    marker.setAttribute("fill", color);
    marker.setAttribute("visibility", "visible");
    tip.hidden = false;
    tip.textContent = `${s.label} · ${xLabel} ${s.xs[j]} · ${yLabel} ${fmt(s.ys[j])}`;
    const box = svg.getBoundingClientRect(), outer = wrap.getBoundingClientRect();
    const px = box.left - outer.left + (sx(s.xs[j]) / width) * box.width;
    const py = box.top - outer.top + (sy(s.ys[j]) / height) * box.height;
    tip.style.left = `${Math.max(0, Math.min(px + 12, outer.width - tip.offsetWidth - 4))}px`;
    tip.style.top = `${Math.max(py - 36, 0)}px`;
    focus(s.id);
  };
  const hide = () => {
    tip.hidden = true;
    marker.setAttribute("visibility", "hidden");
    focus(null);
  };
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const mx = ((event.clientX - box.left) / box.width) * width;
    const my = ((event.clientY - box.top) / box.height) * height;
    let best = null, bestD = Infinity;
    for (const entry of lines.values()) {
      entry.s.xs.forEach((x, j) => {
        const d = (sx(x) - mx) ** 2 + (sy(entry.s.ys[j]) - my) ** 2;
        if (d < bestD) { bestD = d; best = [entry, j]; }
      });
    }
    if (best && bestD < 60 ** 2) show(...best); else hide();
  });
  svg.addEventListener("mouseleave", hide);

  const legend = document.createElement("ul");
  legend.className = "legend";
  legend.setAttribute("aria-label", legendLabel);
  for (const entry of lines.values()) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.seriesId = entry.s.id;
    if (trials) b.dataset.trialId = entry.s.id;
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = entry.color;
    b.append(sw, document.createTextNode(entry.s.label));
    const last = entry.s.xs.length - 1;
    b.addEventListener("focus", () => last >= 0 && show(entry, last));
    b.addEventListener("mouseenter", () => last >= 0 && show(entry, last));
    b.addEventListener("blur", hide);
    b.addEventListener("mouseleave", hide);
    li.appendChild(b);
    legend.appendChild(li);
  }
  container.append(wrap, legend);
}

/**
 * A scatter of `points` ([{id, label, x, y}]) into `container` (cleared first): one focusable
 * <circle class="point" data-trial-id> per point; hover or focus names it, Enter or a click calls
 * `onPick(id)`. `logX` puts x on a log scale when every x is positive.
 */
export function scatterChart(container, points, { xLabel = "", yLabel = "", logX = false, onPick = null } = {}) {
  container.replaceChildren();
  const pts = points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  if (pts.length === 0) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = "No trial has both values yet.";
    container.appendChild(p);
    return;
  }
  const width = 900, height = 320, m = { l: 64, r: 16, t: 12, b: 40 };
  const useLog = logX && pts.every((p) => p.x > 0);
  const tx = useLog ? Math.log10 : (x) => x;
  let [x0, x1] = [Math.min(...pts.map((p) => tx(p.x))), Math.max(...pts.map((p) => tx(p.x)))];
  let [y0, y1] = [Math.min(...pts.map((p) => p.y)), Math.max(...pts.map((p) => p.y))];
  if (x0 === x1) { const d = Math.abs(x0) * 0.1 || 1; x0 -= d; x1 += d; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const px = (x1 - x0) * 0.05, py = (y1 - y0) * 0.05;
  x0 -= px; x1 += px; y0 -= py; y1 += py;
  const sxRaw = (v) => m.l + ((v - x0) / (x1 - x0)) * (width - m.l - m.r);
  const sx = (x) => sxRaw(tx(x));
  const sy = (y) => height - m.b - ((y - y0) / (y1 - y0)) * (height - m.t - m.b);
  const svg = el("svg", {
    viewBox: `0 0 ${width} ${height}`, class: "chart scatter", role: "group",
    "aria-label": `${yLabel} against ${xLabel}, ${pts.length} trials`, preserveAspectRatio: "none",
  });
  const axes = el("g", { class: "axis" }, svg);
  for (const t of ticks(y0, y1)) {
    el("line", { class: "grid", x1: m.l, x2: width - m.r, y1: sy(t), y2: sy(t) }, axes);
    el("text", { x: m.l - 6, y: sy(t) + 4, "text-anchor": "end" }, axes).textContent = fmt(t);
  }
  for (const t of ticks(x0, x1, 8)) {
    el("line", { class: "grid", x1: sxRaw(t), x2: sxRaw(t), y1: m.t, y2: height - m.b }, axes);
    el("text", { x: sxRaw(t), y: height - m.b + 16, "text-anchor": "middle" }, axes).textContent = fmt(useLog ? 10 ** t : t);
  }
  el("text", { x: (m.l + width - m.r) / 2, y: height - 6, "text-anchor": "middle" }, axes).textContent = useLog ? `${xLabel} (log)` : xLabel;
  el("text", { x: 14, y: (m.t + height - m.b) / 2, "text-anchor": "middle",
               transform: `rotate(-90 14 ${(m.t + height - m.b) / 2})` }, axes).textContent = yLabel;
  const wrap = document.createElement("div");
  wrap.className = "chart-wrap";
  const tip = document.createElement("div");
  tip.className = "tooltip";
  tip.hidden = true;
  tip.setAttribute("role", "status");
  wrap.append(svg, tip);
  const show = (p) => {
    tip.hidden = false;
    tip.textContent = `${p.label} · ${xLabel} ${fmt(p.x)} · ${yLabel} ${fmt(p.y)}`;
    const box = svg.getBoundingClientRect(), outer = wrap.getBoundingClientRect();
    const left = box.left - outer.left + (sx(p.x) / width) * box.width;
    const top = box.top - outer.top + (sy(p.y) / height) * box.height;
    tip.style.left = `${Math.max(0, Math.min(left + 12, outer.width - tip.offsetWidth - 4))}px`;
    tip.style.top = `${Math.max(top - 36, 0)}px`;
  };
  const hide = () => { tip.hidden = true; };
  pts.forEach((p, i) => {
    const dot = el("circle", {
      class: "point", cx: sx(p.x).toFixed(1), cy: sy(p.y).toFixed(1), r: 5,
      fill: PALETTE[i % PALETTE.length], tabindex: 0, role: "button", "data-trial-id": p.id,
      "aria-label": `${p.label}: ${xLabel} ${fmt(p.x)}, ${yLabel} ${fmt(p.y)}`,
    }, svg);
    dot.addEventListener("mouseenter", () => show(p));
    dot.addEventListener("focus", () => show(p));
    dot.addEventListener("mouseleave", hide);
    dot.addEventListener("blur", hide);
    if (onPick) {
      dot.addEventListener("click", () => onPick(p.id));
      dot.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onPick(p.id); } });
    }
  });
  container.append(wrap);
}
