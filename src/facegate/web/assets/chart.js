// A bar chart as inline SVG (no library). Accessible: role="img" with a summary label, a
// <title> per bar, and the numbers in a table for screen readers.

import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

function s(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  for (const child of children) {
    element.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return element;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

/** points: [{label, value}], formatting values with format(value). */
export function barChart({ title, points, format = (v) => String(v), unit = "", noun = "days" }) {
  const width = 640;
  const height = 220;
  const pad = { top: 12, right: 8, bottom: 28, left: 48 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const top = niceMax(Math.max(0, ...points.map((p) => p.value)));
  const total = points.reduce((sum, p) => sum + p.value, 0);
  const svg = s("svg", {
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    class: "chart",
    "aria-label": `${title}: ${format(total)}${unit} in total over ${points.length} ${noun}`,
  });
  for (let i = 0; i <= 4; i += 1) {
    const y = pad.top + plotH - (plotH * i) / 4;
    svg.append(s("line", { x1: pad.left, x2: width - pad.right, y1: y, y2: y, class: "grid" }));
    svg.append(
      s("text", { x: pad.left - 6, y: y + 4, class: "axis", "text-anchor": "end" },
        format((top * i) / 4)),
    );
  }
  const slot = plotW / Math.max(1, points.length);
  // A lone bar stays bar-shaped instead of filling the whole plot.
  const barW = Math.max(1, Math.min(slot * 0.7, 48));
  points.forEach((point, index) => {
    const barH = (plotH * point.value) / top;
    const x = pad.left + index * slot + slot * 0.15;
    const bar = s("rect", {
      x: x + (slot * 0.7 - barW) / 2, y: pad.top + plotH - barH, width: barW, height: barH, class: "bar",
    });
    bar.append(s("title", {}, `${point.label}: ${format(point.value)}${unit}`));
    svg.append(bar);
    const every = Math.ceil(points.length / 10);
    if (index % every === 0) {
      svg.append(
        s("text", { x: x + slot * 0.35, y: height - 8, class: "axis", "text-anchor": "middle" },
          point.shortLabel || point.label),
      );
    }
  });
  const table = h("table", { class: "visually-hidden" },
    h("caption", {}, title),
    h("tr", {}, h("th", { scope: "col" }, noun === "days" ? "Day" : "Name"), h("th", { scope: "col" }, "Value")),
    points.map((p) => h("tr", {}, h("td", {}, p.label), h("td", {}, `${format(p.value)}${unit}`))),
  );
  return h("figure", { class: "chart-figure" }, svg, table,
    h("figcaption", { class: "muted small" }, `${title} — total ${format(total)}${unit}`));
}
