// A third-party MCP client (the official TypeScript SDK) browsing and playing any server.
//
//   node servers.mjs '<calls JSON>' stdio <command> [args...]
//   node servers.mjs '<calls JSON>' http <url>
//
// Lists tools, prompts and resources (every page), gets the first prompt, reads the first
// resource, then makes the given tool calls ([{"name", "arguments"}], in order) and prints ONE
// JSON document of what it saw. tests/test_shipped_servers.py asserts on it. Nothing here knows
// about mcpgym.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [callsJson, kind, ...rest] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const transport =
  kind === "stdio"
    ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: process.env, stderr: "inherit" })
    : kind === "http"
      ? new StreamableHTTPClientTransport(new URL(rest[0]))
      : null;
if (transport === null) {
  console.error("usage: node servers.mjs '<calls JSON>' stdio <command> [args...] | http <url>");
  process.exit(2);
}

const bounded = { timeout: 20_000 };
const client = new Client({ name: "mcpgym-interop-servers", version: "0.0.0" });
const errors = [];
client.onerror = (error) => errors.push(String(error));

async function all(list, key) {
  const items = [];
  let cursor;
  do {
    const page = await list(cursor === undefined ? {} : { cursor });
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return items;
}

async function call(name, args) {
  try {
    const { content, isError, _meta, structuredContent } = await client.callTool({ name, arguments: args }, undefined, bounded);
    return { content, isError: isError ?? false, _meta, structuredContent };
  } catch (error) {
    return { error: { code: error.code, message: error.message } };
  }
}

await client.connect(transport, bounded);
const { tools } = await client.listTools(undefined, bounded);
const prompts = await all((p) => client.listPrompts(p, bounded), "prompts");
const resources = await all((p) => client.listResources(p, bounded), "resources");
const report = {
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  tools: Object.fromEntries(tools.map((t) => [t.name, t.inputSchema])),
  prompts: prompts.map((p) => p.name),
  resources: resources.map((r) => r.uri),
  firstPrompt: prompts.length ? await client.getPrompt({ name: prompts[0].name }, bounded) : null,
  firstResource: resources.length ? await client.readResource({ uri: resources[0].uri }, bounded) : null,
  calls: [],
};
for (const { name, arguments: args } of calls) report.calls.push(await call(name, args));
if (transport.terminateSession) await transport.terminateSession();
await client.close();
report.errors = errors;
process.stdout.write(JSON.stringify(report) + "\n");
