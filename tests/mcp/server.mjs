// An upstream MCP server for tests/integration/gwmcp.sh: the SDK's Server with its
// StreamableHTTPServerTransport (stateful sessions) on host 127.0.0.1, a free port. It checks
// the credential the gateway adds (Authorization: Bearer <the file's content>) and logs each
// request it saw (method, headers, JSON body) as a line of LOG.
// usage: node server.mjs PORTFILE LOG CREDFILE json|sse
import { randomUUID } from "node:crypto";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const [portFile, logFile, credFile, mode] = process.argv.slice(2);
const cred = readFileSync(credFile, "utf8").replace(/\n$/, "");
const schema = { type: "object", properties: { text: { type: "string" } } };
const TOOLS = ["echo", "leak_credential", "delete_everything", "admin_stats"].map((name) => ({
  name, description: `the ${name} tool`, inputSchema: schema,
}));

function mcpServer() {
  const s = new Server({ name: "rbx-upstream", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  s.setRequestHandler(CallToolRequestSchema, async (req) => {
    const a = req.params.arguments ?? {};
    switch (req.params.name) {
      case "echo": return { content: [{ type: "text", text: `echo: ${a.text ?? ""}` }] };
      // The credential the gateway added, echoed in four encodings: the gateway scrubs them.
      case "leak_credential":
        return { content: [{ type: "text", text: [cred, Buffer.from(cred).toString("base64"),
          encodeURIComponent(cred), JSON.stringify(cred)].join(" | ") }] };
      case "delete_everything": return { content: [{ type: "text", text: "everything deleted" }] };
      case "admin_stats": return { content: [{ type: "text", text: "stats" }] };
    }
    throw new Error(`no tool ${req.params.name}`);
  });
  return s;
}

const transports = {};
const srv = http.createServer(async (req, res) => {
  let raw = "";
  for await (const c of req) raw += c;
  let body;
  try { body = raw ? JSON.parse(raw) : undefined; } catch { body = raw; }
  const authOk = req.headers.authorization === `Bearer ${cred}`;
  appendFileSync(logFile, JSON.stringify({ method: req.method, path: req.url, headers: req.headers, body, auth_ok: authOk }) + "\n");
  if (req.url !== "/mcp") { res.writeHead(404).end("not here"); return; }
  if (!authOk) { res.writeHead(401, { "content-type": "application/json" }).end('{"error":"bad credential"}'); return; }
  const sid = req.headers["mcp-session-id"];
  let t = sid ? transports[sid] : undefined;
  if (!t) {
    if (sid || req.method !== "POST" || !isInitializeRequest(body)) {
      res.writeHead(sid ? 404 : 400, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: sid ? "no such session" : "initialize first" } }));
      return;
    }
    t = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: mode === "json",
      onsessioninitialized: (id) => { transports[id] = t; },
    });
    t.onclose = () => { if (t.sessionId) delete transports[t.sessionId]; };
    await mcpServer().connect(t);
  }
  await t.handleRequest(req, res, body);
});
srv.listen(0, "127.0.0.1", () => writeFileSync(portFile, String(srv.address().port)));
