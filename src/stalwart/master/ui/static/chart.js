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
 * Each line is a <path class="series" data-trial-id data-points>.
 */
export function lineChart(container, series, { xLabel = "batches", yLabel = "", log = false } = {}) {
  container.replaceChildren();
  const width = 900, height = 360, m = { l: 64, r: 16, t: 12, b: 40 };
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
    "aria-label": `${yLabel} against ${xLabel}, ${series.length} trials`,
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
      class: "series", d, stroke: color, "data-trial-id": s.id, "data-points": s.xs.length,
    }, svg);
    el("title", {}, path).textContent = s.label;
    if (s.xs.length === 1) {  // a single point draws no line: show a dot
      el("circle", { cx: sx(s.xs[0]), cy: sy(s.ys[0]), r: 3, fill: color, "data-trial-id": s.id }, svg);
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
    tip.style.left = `${Math.min(px + 12, outer.width - 260)}px`;
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
  legend.setAttribute("aria-label", "Trials in the chart");
  for (const entry of lines.values()) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.trialId = entry.s.id;
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
