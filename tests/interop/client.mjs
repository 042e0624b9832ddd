// A third-party MCP client (the official TypeScript SDK) driving an mcpgym server.
//
//   node client.mjs stdio <command> [args...]
//   node client.mjs http <url>
//
// Connects, lists tools, makes a few calls (good, badly typed, unknown tool) and prints ONE
// JSON document describing what it saw, plus the raw JSON-RPC wire log, to stdout.
// tests/test_interop.py asserts on it. Nothing here knows about mcpgym.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const sdkPackage = new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url);
const sdk = JSON.parse(readFileSync(sdkPackage, "utf8")).version;

// Every HTTP exchange (method, MCP headers, status), to see the transport-level handshake.
const http = [];
async function tappedFetch(url, init = {}) {
  const headers = new Headers(init.headers);
  const response = await fetch(url, init);
  http.push({
    method: init.method ?? "GET",
    protocolVersion: headers.get("mcp-protocol-version"),
    sessionId: headers.get("mcp-session-id"),
    status: response.status,
    contentType: response.headers.get("content-type"),
  });
  return response;
}

const [kind, ...rest] = process.argv.slice(2);
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" })
    : kind === "http"
      ? new StreamableHTTPClientTransport(new URL(rest[0]), { fetch: tappedFetch })
      : null;
if (transport === null) {
  console.error("usage: node client.mjs stdio <command> [args...] | http <url>");
  process.exit(2);
}

// Tap the wire. Protocol.connect() chains onto an onmessage that is already set, so this sees
// every inbound message (including the initialize response) before the client does.
const wire = [];
transport.onmessage = (message) => wire.push({ dir: "recv", message });
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  wire.push({ dir: "send", message });
  return send(message, options);
};

// Bounded requests: a server that never answers shows up as an error in the report, not a hang.
const bounded = { timeout: 10_000 };

// A call that failed at the protocol level (thrown McpError) or returned a result.
async function call(name, args) {
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, bounded);
    const { content, isError, _meta, structuredContent } = result;
    return { content, isError: isError ?? false, _meta, structuredContent };
  } catch (error) {
    return { error: { code: error.code, message: error.message, data: error.data } };
  }
}

const client = new Client({ name: "mcpgym-interop", version: "0.0.0" });
const errors = []; // anything the SDK reports out of band (e.g. a failed GET stream)
client.onerror = (error) => errors.push(String(error));
await client.connect(transport, bounded);
const { tools } = await client.listTools(undefined, bounded);
const report = {
  sdk,
  offered: LATEST_PROTOCOL_VERSION,
  negotiated: wire.find((w) => w.message.result?.protocolVersion)?.message.result.protocolVersion,
  httpProtocolHeader: transport.protocolVersion ?? null, // what HTTP requests send as MCP-Protocol-Version
  sessionId: transport.sessionId ?? null,
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  tools: Object.fromEntries(tools.map((t) => [t.name, t.inputSchema])),
  echo: await call("echo_message", { message: "hi" }),
  repeat: await call("repeat", { message: "ab", times: 3 }),
  badType: await call("repeat", { times: "x" }),
  unknown: await call("no_such_tool", {}),
};
// Over HTTP, end the session explicitly (DELETE) as a well-behaved client does.
if (transport.terminateSession) await transport.terminateSession();
await client.close();
Object.assign(report, { errors, http, wire });
process.stdout.write(JSON.stringify(report, null, 2) + "\n");
