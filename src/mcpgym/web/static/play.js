// /web: reset, one form per tool, and everything the episode does, pushed live by the server.
// The page's episode id is minted here (as RL clients mint theirs) and kept in the URL
// (#episode=...), so a reload or a second tab follows the same episode.
"use strict";

const page = {
  info: null,
  episodeId: hashParam("episode"),
  lastSeq: -1,
  follower: null,
  busy: false,
  done: false,
  calls: 0,
  lastStep: 0,
};

function newEpisodeId() {
  const bytes = crypto.getRandomValues(new Uint8Array(18));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function banner(message) {
  const el = document.getElementById("banner");
  el.hidden = !message;
  el.textContent = message || "";
}

// Hidden until the page follows an episode: before the first reset there is nothing to be
// live about, and "offline" then read as "the server is down".
function setLive(on) {
  const el = document.getElementById("live");
  el.hidden = false;
  el.className = "live " + (on ? "on" : "off");
  el.textContent = on ? "live" : "reconnecting…";
}

async function load() {
  try {
    page.info = await api("/api/info");
  } catch (e) {
    banner(e.message);
    return;
  }
  banner(null);
  document.title = page.info.environment + " · mcpgym";
  document.getElementById("env-name").textContent = page.info.environment;
  document.getElementById("env-description").replaceChildren(...inlineMarkdown(prose(page.info.description)));
  renderTools(page.info.tools);
  syncButtons();
  if (page.episodeId) watch(page.episodeId, -1);
}

function renderTools(tools) {
  const box = document.getElementById("tools");
  box.replaceChildren();
  for (const tool of tools) box.append(toolCard(tool));
}

function toolCard(tool) {
  const args = toolArgumentsForm(tool.inputSchema);
  const raw = h("textarea", { class: "code raw", rows: 6, name: "raw-arguments", hidden: true, spellcheck: "false" });
  const error = h("div", { class: "field-error form-error", role: "alert" });
  const toggle = h("button", { type: "button", class: "small toggle-json" }, "edit as JSON");
  toggle.addEventListener("click", () => {
    if (raw.hidden) {
      raw.value = json(args.read([]));
      raw.hidden = false;
      args.el.hidden = true;
      toggle.textContent = "edit as form";
    } else {
      try {
        args.write(JSON.parse(raw.value || "{}"));
      } catch (e) { /* keep the form as it was */ }
      raw.hidden = true;
      args.el.hidden = false;
      toggle.textContent = "edit as JSON";
    }
  });
  const form = h("form", { class: "card tool", "data-tool": tool.name, novalidate: true },
    h("div", { class: "tool-head" }, h("h3", {}, tool.name), toggle),
    tool.description ? h("p", { class: "description" }, inlineMarkdown(prose(tool.description))) : null,
    args.empty ? h("p", { class: "note" }, "no arguments") : args.el,
    raw, error,
    h("button", { type: "submit", class: "call" }, "Call " + tool.name));
  form.addEventListener("keydown", (event) => {
    // Enter submits from a one-line input already; Ctrl/Cmd+Enter does from a code box too.
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    let value;
    if (!raw.hidden) {
      // Sent as typed: the server's own validation answers (an isError result).
      try {
        value = JSON.parse(raw.value || "{}");
      } catch (e) {
        error.textContent = "arguments are not valid JSON: " + e.message;
        return;
      }
    } else {
      const errors = [];
      value = args.read(errors);
      if (errors.length) {
        error.textContent = "Fix these first: " + errors.join("; ");
        return;
      }
    }
    await step(tool.name, value, error);
  });
  return form;
}

async function reset(event) {
  event.preventDefault();
  const errorBox = document.getElementById("reset-error");
  errorBox.textContent = "";
  const seedText = document.getElementById("seed").value.trim();
  const optionsText = document.getElementById("options").value.trim();
  let options = null;
  if (optionsText) {
    try {
      options = JSON.parse(optionsText);
    } catch (e) {
      errorBox.textContent = "options are not valid JSON: " + e.message;
      return;
    }
    if (!options || typeof options !== "object" || Array.isArray(options)) {
      errorBox.textContent = "options must be a JSON object";
      return;
    }
  }
  if (seedText && !/^-?\d+$/.test(seedText)) {
    errorBox.textContent = "seed must be a whole number";
    return;
  }
  const id = newEpisodeId();
  const body = { episode_id: id, seed: seedText ? Number(seedText) : null, options, previous: page.episodeId };
  // Stop following the old episode first: its feed's "closed" event is for other tabs.
  const old = { id: page.episodeId, seq: page.lastSeq };
  if (page.follower) page.follower.abort();
  await busy(async () => {
    try {
      const event = await api("/api/reset", body);
      watch(id, -1);
      apply(event);
    } catch (e) {
      errorBox.textContent = e.message;
      if (old.id) watch(old.id, old.seq);
    }
  });
}

async function step(tool, args, errorBox) {
  if (!page.episodeId) {
    errorBox.textContent = "Reset first: there is no episode yet.";
    return;
  }
  await busy(async () => {
    try {
      const event = await api("/api/step", { episode_id: page.episodeId, tool, arguments: args });
      if (event.seq === page.lastSeq + 1) apply(event); // else the live feed brings it, in order
      // Keep what the call did in view, however far down the tool list its form was.
      document.getElementById("result-card").scrollIntoView({ block: "nearest" });
    } catch (e) {
      errorBox.textContent = e.message;
    }
  });
}

async function busy(fn) {
  page.busy = true;
  document.body.classList.add("busy");
  syncButtons();
  try {
    await fn();
  } finally {
    page.busy = false;
    document.body.classList.remove("busy");
    syncButtons();
  }
}

// Every button waits while a request runs; tool buttons stay off once the episode is over
// (the server would only answer "the episode is over").
function syncButtons() {
  document.getElementById("reset").disabled = page.busy;
  document.querySelectorAll("form.tool button.call").forEach((b) => {
    b.disabled = page.busy || page.done || !page.episodeId;
    b.title = page.done ? "The episode is over: reset to play again." : "";
  });
  document.getElementById("tools").classList.toggle("over", page.done);
}

// Follow an episode's feed (replacing any feed followed before).
function watch(id, after) {
  if (page.follower) page.follower.abort();
  page.episodeId = id;
  page.lastSeq = after;
  setHashParam("episode", id);
  document.getElementById("episode-id").textContent = id;
  const controller = new AbortController();
  page.follower = controller;
  follow(`/api/episodes/${id}/events`, () => page.lastSeq, apply, controller.signal, setLive, () => {
    banner("This episode is gone (closed, expired after the idle timeout, or the server restarted): reset to start a new one.");
  });
}

function apply(event) {
  if (event.episode_id !== page.episodeId || event.seq <= page.lastSeq) return;
  page.lastSeq = event.seq;
  if (event.kind === "reset") {
    document.getElementById("history").replaceChildren();
    document.getElementById("result").replaceChildren(h("p", { class: "note" }, "Call a tool."));
    page.calls = 0;
    page.lastStep = 0;
    showObservation(event.state, "what reset() returned", renderObservation(event.observation));
    document.getElementById("last-reward").textContent = "–";
    banner(null);
  } else if (event.kind === "step") {
    page.calls += 1;
    const counted = event.state.step_count > page.lastStep;
    page.lastStep = event.state.step_count;
    const what = counted ? `step ${event.state.step_count}` : "refused, not a step";
    document.getElementById("result").replaceChildren(h("div", { class: "caption" }, `call ${page.calls} (${what}): ${event.tool}(${shortArgs(event.arguments)})`), renderResult(event.result));
    if (counted) showObservation(event.state, `the latest observation (step ${event.state.step_count})`, renderResult(event.result, { stamp: false }));
    document.getElementById("history").append(historyEntry(event, page.calls, counted));
    const stamp = (event.result._meta || {})[STEP_KEY] || {};
    if (counted) document.getElementById("last-reward").textContent = fmt(stamp.reward ?? 0);
  } else if (event.kind === "closed") {
    banner("This episode was reset elsewhere; following the new one.");
    watch(event.next, -1);
    return;
  }
  if (event.state) renderState(event.state);
}

// The OBSERVATION pane shows the episode as it is now: the environment's render() of its
// state when it offers one, else the latest observation the page has.
function showObservation(state, fallbackCaption, fallback) {
  const box = document.getElementById("observation");
  const render = state && state.render;
  if (!render) {
    box.replaceChildren(h("div", { class: "caption" }, fallbackCaption), fallback);
    return;
  }
  box.replaceChildren(h("div", { class: "caption" }, "the environment's render() of its current state"), renderRender(render));
}

function renderRender(render) {
  // EpisodeState.render as the server sends it (snake_case: a Rendering, not an MCP content block).
  const box = h("div", { class: "render" });
  const mime = render.mime_type || "";
  if (render.image && SAFE_IMAGE.test(mime) && BASE64.test(render.image)) {
    box.append(h("img", { class: "result-image", alt: `render (${mime})`, src: `data:${mime};base64,${render.image}` }));
  }
  if (render.markdown) box.append(markdownBlock(render.markdown));
  else if (render.text) box.append(textBlock(render.text));
  return box;
}

function renderObservation(observation) {
  if (typeof observation === "string") return renderText(observation);
  if (observation && typeof observation === "object" && !Array.isArray(observation)) return kvTable(observation, "observation");
  return jsonBlock(observation);
}

function renderState(state) {
  page.done = state.done;
  syncButtons();
  document.getElementById("total-reward").textContent = fmt(state.total_reward);
  document.getElementById("step-count").textContent = String(state.step_count) + (page.info && page.info.max_steps ? ` / ${page.info.max_steps}` : "");
  const flags = document.getElementById("episode-flags");
  flags.replaceChildren();
  const on = trueFlags(state);
  flags.append(...(on.length ? on : ["running"]).map((f) => h("span", { class: "badge " + f }, f)));
  const { render, ...facts } = state; // the picture is in the OBSERVATION pane
  document.getElementById("state").replaceChildren(kvTable(facts, "state"));
}

// Numbered by call, so a refused call (after the episode ended) never repeats the number of the
// step before it; it says it was not counted.
function historyEntry(event, number, counted) {
  const stamp = (event.result._meta || {})[STEP_KEY] || {};
  const flags = [...trueFlags(stamp), event.result.isError ? "error" : null, counted ? null : "not counted"].filter(Boolean);
  return h("li", {}, h("details", { class: "step" + (event.result.isError ? " is-error" : "") },
    h("summary", {}, h("span", { class: "num" }, `#${number}`), " ", h("b", {}, event.tool),
      h("code", {}, shortArgs(event.arguments)), " → reward ", h("b", { class: "reward" }, fmt(stamp.reward ?? 0)),
      flags.map((f) => h("span", { class: "badge " + f }, f))),
    h("div", { class: "caption" }, "arguments"), jsonBlock(event.arguments),
    h("div", { class: "caption" }, "result"), renderResult(event.result)));
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("reset-form").addEventListener("submit", reset);
  setupTokenDialog(load);
  load();
});
