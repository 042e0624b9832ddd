// /view: recorded runs. The summary rows come in one request; an episode's steps are fetched
// only when it is opened. The reward plot is inline SVG drawn here (no library, no network).
"use strict";

const PAGE_SIZE = 100;
const SVG = "http://www.w3.org/2000/svg";
const state = { rows: [], shown: [], page: 0, sort: "n", descending: false, selected: null };

function banner(message) {
  const el = document.getElementById("banner");
  el.hidden = !message;
  el.textContent = message || "";
}

async function load() {
  let data;
  try {
    data = await api("/api/runs");
  } catch (e) {
    banner(e.message);
    return;
  }
  banner(null);
  state.rows = data.episodes;
  document.getElementById("summary").textContent =
    `${plural(data.episodes.length, "episode")} from ${data.sources.join(", ")} (indexed in ${data.index_seconds}s)`;
  const statuses = [...new Set(state.rows.map((r) => r.status))].sort();
  const select = document.getElementById("status-filter");
  const chosen = select.value;
  // Spread: replaceChildren takes nodes, and an array would be inserted as its text.
  select.replaceChildren(h("option", { value: "" }, "any status"), ...statuses.map((s) => h("option", { value: s }, s)));
  select.value = statuses.includes(chosen) ? chosen : "";
  refilter();
  const wanted = hashParam("episode");
  if (wanted !== null && state.selected === null) openEpisode(Number(wanted));
}

function refilter() {
  const words = document.getElementById("filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const status = document.getElementById("status-filter").value;
  const minText = document.getElementById("min-reward").value;
  const min = minText === "" ? -Infinity : Number(minText);
  state.shown = state.rows.filter((r) => {
    if (status && r.status !== status) return false;
    if (r.reward < min) return false;
    if (!words.length) return true;
    const hay = [r.episode_id, r.source, r.seed, r.status, r.stop, r.error, r.environment, r.index].join(" ").toLowerCase();
    return words.every((w) => hay.includes(w));
  });
  sortRows();
  state.page = 0;
  renderTable();
  renderPlot();
}

function sortRows() {
  const key = state.sort;
  const sign = state.descending ? -1 : 1;
  state.shown.sort((a, b) => {
    const x = a[key] ?? "", y = b[key] ?? "";
    return (x < y ? -1 : x > y ? 1 : a.n - b.n) * sign;
  });
}

function renderTable() {
  const pages = Math.max(1, Math.ceil(state.shown.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  const slice = state.shown.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  document.getElementById("rows").replaceChildren(...slice.map((r) => h("tr", {
    "data-n": r.n, class: r.n === state.selected ? "selected" : null, onclick: () => openEpisode(r.n) },
    h("td", { class: "num" }, r.index ?? r.n),
    h("td", { title: r.episode_id || "" }, r.episode_id || "–"),
    // A recording's file is named after its episode: show where it is, not the name again.
    h("td", { title: r.source }, r.format === "record" ? (r.source.includes("/") ? r.source.replace(/[^/]*$/, "") : "./") : r.source),
    h("td", {}, r.seed ?? "–"),
    h("td", {}, h("span", { class: "badge " + r.status.replace(" ", "-") }, r.status)), // "not done" is not "done"
    h("td", { class: "reward" }, fmt(r.reward)),
    h("td", { class: "num" }, r.length),
    h("td", { class: "num" }, r.duration.toFixed(2)))));
  document.getElementById("count").textContent = `${state.shown.length} of ${state.rows.length}`;
  document.getElementById("page-label").textContent = `page ${state.page + 1} of ${pages}`;
  document.getElementById("prev").disabled = state.page === 0;
  document.getElementById("next").disabled = state.page >= pages - 1;
}

// Reward against episode order (rollout index, or start time for recordings): each episode as a
// dot (up to 2,000 of them), and the mean and ±1 standard deviation over consecutive bins.
function renderPlot() {
  const rows = [...state.shown].sort((a, b) => a.n - b.n);
  const box = document.getElementById("plot");
  const W = 900, H = 220, L = 48, R = 12, T = 10, B = 28;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "plot");
  svg.setAttribute("role", "img");
  const el = (tag, attrs, text) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  if (!rows.length) {
    el("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no episodes");
    box.replaceChildren(svg);
    return;
  }
  const rewards = rows.map((r) => r.reward);
  let lo = Math.min(0, ...rewards), hi = Math.max(...rewards);
  if (hi - lo < 1e-9) hi = lo + 1;
  const x = (i) => L + (rows.length === 1 ? (W - L - R) / 2 : (i / (rows.length - 1)) * (W - L - R));
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" });
  el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" });
  for (const v of [lo, (lo + hi) / 2, hi]) el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v));
  el("text", { x: L, y: H - 8 }, "1");
  el("text", { x: W - R, y: H - 8, "text-anchor": "end" }, String(rows.length));
  el("text", { x: (L + W) / 2, y: H - 8, "text-anchor": "middle" }, "episode (in order)");
  const bins = Math.min(50, rows.length);
  const size = rows.length / bins;
  const stats = [];
  for (let b = 0; b < bins; b++) {
    const part = rewards.slice(Math.floor(b * size), Math.max(Math.floor((b + 1) * size), Math.floor(b * size) + 1));
    const mean = part.reduce((s, v) => s + v, 0) / part.length;
    const sd = Math.sqrt(part.reduce((s, v) => s + (v - mean) ** 2, 0) / part.length);
    stats.push({ i: Math.floor(b * size) + (part.length - 1) / 2, mean, sd });
  }
  const upper = stats.map((s) => `${x(s.i)},${y(Math.min(hi, s.mean + s.sd))}`);
  const lower = stats.map((s) => `${x(s.i)},${y(Math.max(lo, s.mean - s.sd))}`).reverse();
  el("polygon", { points: [...upper, ...lower].join(" "), class: "band" });
  if (rows.length <= 2000) rows.forEach((r, i) => el("circle", { cx: x(i), cy: y(r.reward), r: 2.2, class: "point" }));
  el("polyline", { points: stats.map((s) => `${x(s.i)},${y(s.mean)}`).join(" "), class: "mean" });
  const mean = rewards.reduce((s, v) => s + v, 0) / rewards.length;
  document.getElementById("plot-caption").textContent =
    ` mean ${fmt(mean)} over ${plural(rows.length, "episode")}; line: mean of ${plural(bins, "bin")}, band: ±1 sd`;
  box.replaceChildren(svg);
}

async function openEpisode(n) {
  state.selected = n;
  setHashParam("episode", String(n));
  document.querySelectorAll("#rows tr").forEach((tr) => tr.classList.toggle("selected", Number(tr.dataset.n) === n));
  const box = document.getElementById("episode");
  box.replaceChildren(h("p", { class: "note" }, "loading…"));
  try {
    const data = await api(`/api/episodes/${n}`);
    if (state.selected !== n) return;
    box.replaceChildren(...(data.format === "record" ? recordTimeline(data) : rolloutTimeline(data)));
  } catch (e) {
    box.replaceChildren(h("p", { class: "field-error" }, e.message));
  }
}

function header(summary) {
  return kvTable({ episode: summary.episode_id ?? "–", file: summary.source, seed: summary.seed ?? "–",
    status: summary.status, reward: summary.reward, steps: summary.length, seconds: summary.duration }, "episode-summary");
}

function recordTimeline(data) {
  const out = [header(data.summary)];
  const steps = h("ol", { class: "steps" });
  for (const event of data.events) {
    if (event.event === "reset") {
      out.push(h("div", { class: "caption" }, "reset: first observation"), renderObservationValue(event.observation));
      if (event.render) out.push(h("div", { class: "caption" }, "render() after reset"), recordedRender(event.render));
      if (event.options) out.push(h("div", { class: "caption" }, "options"), jsonBlock(event.options));
    } else if (event.event === "step") {
      const { tool, arguments: _a, result, step, time, duration, event: _e, ...stamp } = event;
      const flags = [...trueFlags(stamp), result && result.isError ? "error" : null].filter(Boolean);
      steps.append(h("li", {}, h("details", { class: "step" + (event.result && event.result.isError ? " is-error" : "") },
        h("summary", {}, h("span", { class: "num" }, `#${event.step}`), " ", h("b", {}, event.tool), h("code", {}, shortArgs(event.arguments)),
          " → reward ", h("b", { class: "reward" }, fmt(event.reward)), flags.map((f) => h("span", { class: "badge " + f }, f)),
          h("span", { class: "num" }, ` ${took(event.duration || 0)}`)),
        h("div", { class: "caption" }, "arguments"), jsonBlock(event.arguments),
        h("div", { class: "caption" }, "result"), renderResult(event.result || {}),
        event.render ? [h("div", { class: "caption" }, "render() after the step"), recordedRender(event.render)] : null)));
    } else if (event.event === "close") {
      steps.append(h("li", { class: "note" }, `closed after ${plural(event.step_count, "step")}, total reward ${fmt(event.total_reward)}`));
    }
  }
  out.push(h("div", { class: "caption" }, "timeline"), steps);
  return out;
}

function rolloutTimeline(data) {
  const t = data.trajectory;
  const out = [header(data.summary)];
  if (t.error) out.push(h("div", { class: "banner" }, t.error));
  out.push(h("div", { class: "caption" }, "task (first observation)"), renderObservationValue(t.observation));
  const turns = h("ol", { class: "steps" });
  (t.turns || []).forEach((turn, i) => {
    const a = turn.assistant || {};
    const items = [h("div", { class: "caption" }, `turn ${i + 1}` + (a.finish_reason ? ` (${a.finish_reason})` : ""))];
    if (a.content) items.push(h("pre", { class: "text assistant" }, a.content));
    for (const s of turn.steps || []) {
      const flags = [s.done ? (s.truncated ? "truncated" : "done") : null, s.is_error ? "error" : null, s.stepped ? null : "not stepped"].filter(Boolean);
      items.push(h("details", { class: "step" + (s.is_error ? " is-error" : "") },
        h("summary", {}, h("b", {}, s.tool), h("code", {}, shortArgs(s.arguments)), " → reward ", h("b", { class: "reward" }, fmt(s.reward)),
          flags.map((f) => h("span", { class: "badge " + f.replace(" ", "-") }, f))),
        h("div", { class: "caption" }, "arguments"), jsonBlock(s.arguments),
        h("div", { class: "caption" }, "output"), renderText(s.output || "")));
    }
    turns.append(h("li", { class: "turn" }, items));
  });
  out.push(h("div", { class: "caption" }, `${(t.turns || []).length} turns, stop: ${t.stop}`), turns);
  if ((t.messages || []).length) {
    out.push(h("details", {}, h("summary", { class: "caption" }, `conversation (${t.messages.length} messages)`), jsonBlock(t.messages)));
  }
  return out;
}

// A recorded render(): its image block (restored from its blob), markdown or text.
function recordedRender(render) {
  const box = h("div", { class: "render" });
  if (render.image) box.append(renderContent(render.image));
  if (render.markdown) box.append(markdownBlock(render.markdown));
  else if (render.text) box.append(textBlock(render.text));
  return box;
}

function renderObservationValue(observation) {
  if (typeof observation === "string") return renderText(observation);
  if (observation && typeof observation === "object" && !Array.isArray(observation)) return kvTable(observation, "observation");
  return jsonBlock(observation);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const id of ["filter", "min-reward"]) document.getElementById(id).addEventListener("input", refilter);
  document.getElementById("status-filter").addEventListener("change", refilter);
  document.getElementById("reload").addEventListener("click", load);
  document.getElementById("prev").addEventListener("click", () => { state.page--; renderTable(); });
  document.getElementById("next").addEventListener("click", () => { state.page++; renderTable(); });
  document.querySelectorAll("th[data-sort]").forEach((th) => th.addEventListener("click", () => {
    state.descending = state.sort === th.dataset.sort ? !state.descending : false;
    state.sort = th.dataset.sort;
    sortRows();
    renderTable();
  }));
  setupTokenDialog(load);
  load();
});
