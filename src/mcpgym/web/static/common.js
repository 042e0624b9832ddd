// Shared by /web and /view: the API client (bearer token), DOM helpers and the renderer of MCP
// tool results. Everything a server or tool sent is put on the page as text (textContent) or as a
// data: URL of a checked image/audio type, never parsed as HTML; the page's CSP forbids inline
// script besides.
"use strict";

const STEP_KEY = "io.mcpgym/step";
const TOKEN_KEY = "mcpgym.token";

// A token given as #token=... is moved to this tab's session storage and dropped from the URL.
(function takeTokenFromHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
})();

function hashParam(name) {
  return new URLSearchParams(location.hash.slice(1)).get(name);
}

function setHashParam(name, value) {
  const params = new URLSearchParams(location.hash.slice(1));
  if (value === null) params.delete(name); else params.set(name, value);
  history.replaceState(null, "", location.pathname + location.search + "#" + params.toString());
}

const BASE = location.pathname.replace(/\/+$/, "");

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(path, body) {
  const init = { headers: authHeaders() };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(BASE + path, init);
  if (response.status === 401) {
    askForToken();
    throw new ApiError(401, "This server needs its access token (--token).");
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch (e) {
    throw new ApiError(response.status, `HTTP ${response.status}: ${response.statusText}`);
  }
  if (!response.ok) throw new ApiError(response.status, payload.error || `HTTP ${response.status}`);
  return payload;
}

// Server-Sent Events over fetch (EventSource cannot send the Authorization header). Calls
// onEvent(parsed) for each event; reconnects with Last-Event-ID until signal is aborted, or
// calls onGone() when the server no longer has the episode.
async function follow(path, lastId, onEvent, signal, onStatus, onGone) {
  while (!signal.aborted) {
    try {
      const headers = { ...authHeaders(), "Last-Event-ID": String(lastId()) };
      const response = await fetch(BASE + path, { headers, signal });
      if (response.status === 401) { askForToken(); return; }
      if (response.status === 404) { onStatus(false); onGone(); return; }
      if (!response.ok) throw new Error("HTTP " + response.status);
      onStatus(true);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (data) onEvent(JSON.parse(data));
        }
      }
    } catch (e) {
      if (signal.aborted) return;
    }
    onStatus(false);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// Asked again after a token was sent and refused: say so, or the same prompt reads as if
// nothing had been tried.
function askForToken() {
  const dialog = document.getElementById("token-dialog");
  if (!dialog || dialog.open) return;
  const rejected = sessionStorage.getItem(TOKEN_KEY) !== null;
  let note = dialog.querySelector(".token-rejected");
  if (!note) {
    note = h("p", { class: "token-rejected field-error", role: "alert" });
    dialog.querySelector("form").prepend(note);
  }
  note.textContent = rejected ? "Token rejected: the server did not accept it. Check it and try again." : "";
  dialog.showModal();
}

function setupTokenDialog(onToken) {
  const dialog = document.getElementById("token-dialog");
  const form = dialog.querySelector("form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, form.elements.token.value);
    dialog.close();
    onToken();
  });
}

// h("div", {class: "x", onclick: fn}, child, "text") -> element. Strings become text nodes.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

// "1 episode", "3 episodes".
function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

// A step's duration: "1.5s", "12 ms", "<1 ms" (a recorded 0.0004 is not "0s").
function took(seconds) {
  if (seconds >= 1) return `${fmt(seconds)}s`;
  return seconds >= 0.001 ? `${Math.round(seconds * 1000)} ms` : "<1 ms";
}

function fmt(number) {
  if (typeof number !== "number") return String(number);
  return Number.isInteger(number) ? String(number) : number.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
}

function jsonBlock(value, cls) {
  return h("pre", { class: "json " + (cls || "") }, json(value));
}

// A value as a key/value table, nested objects as nested tables (reward components, state info).
function kvTable(object, cls) {
  const table = h("table", { class: "kv " + (cls || "") });
  for (const [key, value] of Object.entries(object)) {
    let cell;
    if (value && typeof value === "object" && !Array.isArray(value)) cell = Object.keys(value).length ? kvTable(value) : h("code", {}, "{}");
    else if (Array.isArray(value)) cell = h("code", {}, JSON.stringify(value));
    else if (typeof value === "boolean") cell = h("span", { class: "flag " + (value ? "on" : "off") }, String(value));
    else if (typeof value === "string" && value.includes("\n")) cell = textBlock(value);
    else cell = h("span", {}, typeof value === "number" ? fmt(value) : String(value));
    table.append(h("tr", { "data-key": key }, h("th", {}, key), h("td", {}, cell)));
  }
  return table;
}

const SAFE_IMAGE = /^image\/(png|jpeg|gif|webp|bmp|avif)$/;
const SAFE_AUDIO = /^audio\/[\w.+-]+$/;
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;

function renderText(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return jsonBlock(JSON.parse(trimmed), "text-json");
    } catch (e) { /* plain text after all */ }
  }
  return textBlock(text);
}

// Preformatted text. ANSI colour codes (a Gymnasium `ansi` render colours the agent's cell)
// are dropped and what they colour is marked, so the text reads as on a terminal.
const ANSI_SGR = /\x1b\[([0-9;]*)m/g;

function textBlock(text) {
  const pre = h("pre", { class: "text" });
  let marked = false, last = 0;
  const add = (part) => { if (part) pre.append(marked ? h("mark", { class: "ansi" }, part) : part); };
  for (const match of text.matchAll(ANSI_SGR)) {
    add(text.slice(last, match.index));
    marked = !/^0*$/.test(match[1]);  // "0" or nothing resets; any other code colours
    last = match.index + match[0].length;
  }
  add(text.slice(last));
  return pre;
}

function renderContent(item) {
  switch (item.type) {
    case "text":
      return renderText(item.text || "");
    case "image":
      if (SAFE_IMAGE.test(item.mimeType || "") && BASE64.test(item.data || "")) {
        return h("img", { class: "result-image", alt: "image result (" + item.mimeType + ")", src: `data:${item.mimeType};base64,${item.data}` });
      }
      return h("p", { class: "note" }, `image of type ${item.mimeType} not shown`);
    case "audio":
      if (SAFE_AUDIO.test(item.mimeType || "") && BASE64.test(item.data || "")) {
        return h("audio", { controls: true, src: `data:${item.mimeType};base64,${item.data}` });
      }
      return h("p", { class: "note" }, `audio of type ${item.mimeType} not shown`);
    case "resource": {
      const r = item.resource || {};
      return h("div", { class: "resource" }, h("div", { class: "caption" }, "resource " + (r.uri || "")),
        r.text !== undefined ? renderText(r.text) : h("p", { class: "note" }, `${(r.blob || "").length} base64 characters (${r.mimeType || "binary"})`));
    }
    case "resource_link":
      return h("div", { class: "resource" }, h("div", { class: "caption" }, "resource link"), h("code", {}, `${item.name || ""} ${item.uri || ""}`));
    default:
      return jsonBlock(item);
  }
}

// An MCP CallToolResult: its content items, structured content, and the step stamp (whatever
// fields it carries: reward, done, truncated, terminated, reward components...).
function renderResult(result, { stamp: showStamp = true } = {}) {
  const box = h("div", { class: "result" + (result.isError ? " is-error" : "") });
  if (result.isError) box.append(h("div", { class: "badge error" }, "tool error"));
  for (const item of result.content || []) box.append(renderContent(item));
  if (!(result.content || []).length) box.append(h("p", { class: "note" }, "(no content)"));
  if (result.structuredContent !== undefined) {
    // Folded when it only repeats the text (the SDK wraps a plain return value as {"result": ...}).
    const texts = (result.content || []).filter((c) => c.type === "text").map((c) => c.text);
    const same = JSON.stringify(result.structuredContent);
    const repeats = texts.length === 1 && (sameJson(texts[0], same) || same === JSON.stringify({ result: texts[0] }));
    box.append(h("details", { class: "structured", open: !repeats },
      h("summary", { class: "caption" }, "structured content" + (repeats ? " (same as the text)" : "")),
      jsonBlock(result.structuredContent, "structured")));
  }
  const meta = { ...(result._meta || {}) };
  const stamp = meta[STEP_KEY];
  delete meta[STEP_KEY];
  if (stamp && showStamp) {
    const { v, ...shown } = stamp; // the stamp's protocol version: for clients, not people
    box.append(h("div", { class: "caption" }, "step"), kvTable(shown, "stamp"));
  }
  if (Object.keys(meta).length) box.append(h("div", { class: "caption" }, "_meta"), jsonBlock(meta));
  return box;
}

// The little markdown a render() needs (pipe tables, **bold**, `code`, paragraphs), built as
// elements from text: nothing an environment sends is parsed as HTML.
function markdownBlock(markdown) {
  const box = h("div", { class: "markdown" });
  let table = null;
  for (const line of markdown.split("\n")) {
    const row = line.trim();
    if (row.startsWith("|") && row.endsWith("|")) {
      const cells = row.slice(1, -1).split("|").map((c) => c.trim());
      if (cells.every((c) => /^:?-+:?$/.test(c))) continue; // the header rule
      if (!table) box.append(table = h("table", { class: "md" }));
      table.append(h("tr", {}, cells.map((c) => h(table.rows.length ? "td" : "th", {}, inlineMarkdown(c)))));
      continue;
    }
    table = null;
    if (row) box.append(h("p", {}, inlineMarkdown(row)));
  }
  return box;
}

function inlineMarkdown(text) {
  return text.split(/(\*\*[^*]+\*\*|`[^`]+`)/).filter(Boolean).map((part) => {
    if (part.startsWith("**") && part.endsWith("**") && part.length > 4) return h("b", {}, part.slice(2, -2));
    if (part.startsWith("`") && part.endsWith("`") && part.length > 2) return h("code", {}, part.slice(1, -1));
    return part;
  });
}

function sameJson(text, serialised) {
  try {
    return JSON.stringify(JSON.parse(text)) === serialised;
  } catch (e) {
    return false;
  }
}

// Docstrings are wrapped by hand: join their lines, keep their paragraphs.
function prose(text) {
  return (text || "").replace(/([^\n])\n(?=[^\n])/g, "$1 ");
}

// The names of a stamp's or state's true flags (done, truncated, terminated, whatever it carries).
function trueFlags(object) {
  return Object.entries(object || {}).filter(([, v]) => v === true).map(([k]) => k);
}

function shortArgs(args) {
  const text = JSON.stringify(args || {});
  return text.length > 80 ? text.slice(0, 77) + "…" : text;
}
