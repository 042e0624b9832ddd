// /view: evaluation reports and per-run charts (GET /api/charts, computed by web/_charts.py):
// a rolling mean of reward over episode order, each rubric component's rolling mean, and a
// reward histogram; every run on the page is overlaid in its own colour. Inline SVG, no library.
"use strict";

const CHART_SVG = "http://www.w3.org/2000/svg";
const COLOURS = ["#3559e0", "#d9480f", "#127a3f", "#9c36b5", "#1098ad", "#a61e4d", "#5f3dc4", "#e67700"];
const charts = { window: null };

function svgNode(parent, tag, attrs, text) {
  const node = document.createElementNS(CHART_SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  parent.append(node);
  return node;
}

function num(v) {
  return v === null || v === undefined || Number.isNaN(v) ? "–" : Number(v).toFixed(3);
}

function frame(id, width, height) {
  const svg = document.createElementNS(CHART_SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "plot");
  svg.setAttribute("role", "img");
  svg.id = id;
  return svg;
}

function lineChart(id, title, series, height = 200) {
  // series: [{run, colour, values}] plotted against episode position 1..n (each run its own length).
  const W = 900, H = height, L = 48, R = 12, T = 18, B = 26;
  const svg = frame(id, W, H);
  const all = series.flatMap((s) => s.values);
  let lo = Math.min(0, ...all), hi = Math.max(...all);
  if (!(hi - lo > 1e-9)) hi = lo + 1;
  const longest = Math.max(...series.map((s) => s.values.length));
  const x = (i) => L + (longest <= 1 ? (W - L - R) / 2 : (i / (longest - 1)) * (W - L - R));
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  svgNode(svg, "text", { x: L, y: 12, class: "chart-title" }, title);
  svgNode(svg, "line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
  svgNode(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  for (const v of [lo, (lo + hi) / 2, hi]) svgNode(svg, "text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, num(v));
  svgNode(svg, "text", { x: W - R, y: H - 6, "text-anchor": "end" }, `episode ${longest}`);
  for (const s of series) {
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    svgNode(svg, "polyline", { points, class: "series", stroke: s.colour, "data-run": s.run, "data-points": s.values.length });
    if (s.values.length === 1) svgNode(svg, "circle", { cx: x(0), cy: y(s.values[0]), r: 3, fill: s.colour, class: "series-point" });
  }
  return svg;
}

function histogramChart(edges, runs) {
  const W = 900, H = 200, L = 48, R = 12, T = 18, B = 26;
  const svg = frame("histogram", W, H);
  svgNode(svg, "text", { x: L, y: 12, class: "chart-title" }, "reward histogram (episodes per bin)");
  const bins = edges.length - 1;
  const top = Math.max(1, ...runs.flatMap((r) => r.histogram));
  const slot = (W - L - R) / bins;
  const bar = slot / runs.length;
  svgNode(svg, "line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  svgNode(svg, "text", { x: L, y: H - 6 }, num(edges[0]));
  svgNode(svg, "text", { x: W - R, y: H - 6, "text-anchor": "end" }, num(edges[bins]));
  svgNode(svg, "text", { x: L - 6, y: T + 4, "text-anchor": "end" }, String(top));
  runs.forEach((run, r) => {
    run.histogram.forEach((count, b) => {
      if (!count) return;
      const height = (count / top) * (H - T - B);
      svgNode(svg, "rect", {
        x: (L + b * slot + r * bar).toFixed(1), y: (H - B - height).toFixed(1), width: Math.max(1, bar - 1).toFixed(1),
        height: height.toFixed(1), fill: run.colour, class: "bar", "data-run": run.name, "data-count": count,
      }, undefined);
    });
  });
  return svg;
}

function reportsTable(reports) {
  const maxK = Math.max(...reports.map((r) => r.pass_at_k.length));
  const head = ["report", "target", "model", "tasks × samples", "mean reward [95%]",
    ...Array.from({ length: maxK }, (_, i) => `pass@${i + 1}`), "failed"];
  const rows = reports.map((r) => h("tr", { "data-path": r.path },
    h("td", {}, r.path), h("td", {}, r.target), h("td", {}, r.model), h("td", {}, `${r.tasks} × ${r.samples}`),
    h("td", {}, `${num(r.reward.value)} [${num(r.reward.low)}, ${num(r.reward.high)}]`),
    ...Array.from({ length: maxK }, (_, i) => h("td", { class: "pass" }, r.pass_at_k[i] ? num(r.pass_at_k[i].value) : "–")),
    h("td", {}, String(r.failed))));
  return h("table", { id: "reports", class: "episodes" },
    h("thead", {}, h("tr", {}, head.map((t) => h("th", {}, t)))), h("tbody", {}, rows));
}

async function loadCharts() {
  const box = document.getElementById("charts");
  let data;
  try {
    data = await api(`/api/charts${charts.window ? `?window=${charts.window}` : ""}`);
  } catch (e) {
    box.replaceChildren(h("p", { class: "note" }, `charts: ${e.message}`));
    return;
  }
  const parts = [];
  if (data.reports.length) parts.push(h("h3", {}, "Evaluation reports"), reportsTable(data.reports));
  const runs = data.runs.map((run, i) => ({ ...run, colour: COLOURS[i % COLOURS.length] }));
  if (runs.length) {
    const input = h("input", { id: "window", type: "number", min: 1, value: data.window, "aria-label": "rolling window" });
    input.addEventListener("change", () => { charts.window = Number(input.value) || null; loadCharts(); });
    parts.push(h("div", { class: "filters" }, h("label", { for: "window" }, "rolling mean over"), input, "episodes"));
    parts.push(h("ul", { id: "legend", class: "legend" }, runs.map((r) =>
      h("li", { "data-run": r.name }, h("span", { class: "swatch", style: `background:${r.colour}` }),
        `${r.name} (${r.rewards.length} scored of ${r.episodes})`))));
    parts.push(lineChart("rolling", `reward, rolling mean over ${plural(data.window, "episode")}`,
      runs.map((r) => ({ run: r.name, colour: r.colour, values: r.rolling }))));
    const names = [...new Set(runs.flatMap((r) => Object.keys(r.components)))].sort();
    for (const name of names) {
      const chart = lineChart(`component-${name}`, `component ${name}, rolling mean`,
        runs.filter((r) => r.components[name]).map((r) => ({ run: r.name, colour: r.colour, values: r.components[name] })), 140);
      chart.classList.add("component-chart");
      chart.dataset.component = name;
      parts.push(chart);
    }
    parts.push(histogramChart(data.edges, runs));
  }
  if (!parts.length) parts.push(h("p", { class: "note" }, "No runs or reports to chart."));
  box.replaceChildren(...parts);
}

document.addEventListener("DOMContentLoaded", () => {
  loadCharts();
  document.getElementById("reload").addEventListener("click", loadCharts);
});
