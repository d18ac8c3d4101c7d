// The MCP client of tests/integration/gwmcp.sh: the SDK's Client over its
// StreamableHTTPClientTransport, run in a sandbox against $RUNBOX_API_URL/v1/mcp/SERVER with the
// run token (or, for the test's controls, on the host straight at an upstream URL with its
// credential). Prints one JSON object: what it saw, and "seen_hex", everything it received plus
// its environment, XOR 0x5A, so that no scrubber of runbox's output can hide a leak.
// usage: node client.mjs SERVER [--keep] [--idem] [--foreign SESSION]... [--direct URL CREDFILE]
// --idem: one tools/call sent by hand three times, with Idempotency-Key k1, k1 again and k2.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = process.argv.slice(2);
const server = args[0];
const keep = args.includes("--keep");
const idem = args.includes("--idem");
const foreign = args.flatMap((a, i) => (a === "--foreign" ? [args[i + 1]] : []));
const di = args.indexOf("--direct");
let url, auth;
if (di >= 0) {
  url = new URL(args[di + 1]);
  auth = `Bearer ${readFileSync(args[di + 2], "utf8").replace(/\n$/, "")}`;
} else {
  url = new URL(`${process.env.RUNBOX_API_URL}/v1/mcp/${server}`);
  auth = `Bearer ${process.env.RUNBOX_TOKEN}`;
}
const out = { url: String(url) };
const seen = [];
const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: auth } } });
const client = new Client({ name: "rbx-mcp-test", version: "1.0.0" });
const attempt = async (key, f) => {
  try { out[key] = await f(); } catch (e) { out[key] = { error: String(e.message ?? e), code: e.code, data: e.data }; }
  seen.push(JSON.stringify(out[key]));
};
await attempt("connect", async () => { await client.connect(transport); return { ok: true, session: transport.sessionId }; });
if (out.connect.ok) {
  await attempt("tools", async () => (await client.listTools()).tools.map((t) => t.name));
  await attempt("echo", async () => (await client.callTool({ name: "echo", arguments: { text: "hello-mcp" } })).content);
  await attempt("leak", async () => (await client.callTool({ name: "leak_credential", arguments: {} })).content);
  await attempt("denied", async () => (await client.callTool({ name: "delete_everything", arguments: {} })).content);
  // A batch holding a refused call: refused whole.
  await attempt("batch", async () => {
    const r = await fetch(url, { method: "POST", headers: { Authorization: auth, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", "Mcp-Session-Id": transport.sessionId, "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify([{ jsonrpc: "2.0", id: 901, method: "tools/call", params: { name: "echo", arguments: { text: "b" } } },
        { jsonrpc: "2.0", id: 902, method: "tools/call", params: { name: "delete_everything", arguments: {} } }]) });
    return { status: r.status, body: await r.text() };
  });
  // A batch of a call the policy may hold for approval and an allowed one: where it is held,
  // refused whole (one approval shows one call); elsewhere both answer.
  await attempt("heldbatch", async () => {
    const r = await fetch(url, { method: "POST", headers: { Authorization: auth, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", "Mcp-Session-Id": transport.sessionId, "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify([{ jsonrpc: "2.0", id: 911, method: "tools/call", params: { name: "echo", arguments: { text: "hb" } } },
        { jsonrpc: "2.0", id: 912, method: "tools/call", params: { name: "admin_stats", arguments: {} } }]) });
    return { status: r.status, body: await r.text() };
  });
  // The same tools/call with one key twice (the second answer replayed), then with another.
  if (idem)
    for (const [i, key] of ["k1", "k1", "k2"].entries())
      await attempt(`idem${i}`, async () => {
        const r = await fetch(url, { method: "POST", headers: { Authorization: auth, "Content-Type": "application/json",
          Accept: "application/json, text/event-stream", "Mcp-Session-Id": transport.sessionId,
          "Mcp-Protocol-Version": "2025-06-18", "Idempotency-Key": key },
          body: JSON.stringify({ jsonrpc: "2.0", id: 951, method: "tools/call", params: { name: "echo", arguments: { text: "idem-1" } } }) });
        return { status: r.status, replayed: r.headers.get("idempotent-replayed"), body: await r.text() };
      });
}
// Sessions named by hand: another run's, or the upstream's own id.
for (const [i, sid] of foreign.entries()) {
  await attempt(`foreign${i}`, async () => {
    const r = await fetch(url, { method: "POST", headers: { Authorization: auth, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" }) });
    return { status: r.status, body: await r.text() };
  });
}
if (out.connect.ok && !keep) {
  const sid = transport.sessionId;
  await attempt("terminate", async () => { await transport.terminateSession(); return { ok: true }; });
  // The ended session's id is not the run's any more.
  await attempt("after_delete", async () => {
    const r = await fetch(url, { method: "POST", headers: { Authorization: auth, "Content-Type": "application/json",
      Accept: "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/list" }) });
    return { status: r.status, body: await r.text() };
  });
}
if (!keep) await client.close();
let environ = "";
try { environ = readFileSync("/proc/self/environ", "latin1"); } catch {}
seen.push(JSON.stringify(process.env), environ);
out.seen_hex = Buffer.from(Buffer.from(seen.join("\n")).map((b) => b ^ 0x5a)).toString("hex");
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
