// The unmodified e2b SDK (2.51.0) against runbox serve --e2b-listen (docs/e2b.md). Each property
// has a control: the same call where it should succeed, so no test passes by accident.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { AuthenticationError, CommandExitError, FileNotFoundError, InvalidArgumentError, Sandbox, TimeoutError } from 'e2b';

import { command, runbox, startDaemon } from './daemon.mjs';

let d;
const live = [];

async function create(extra = {}, template) {
  const sbx = template ? await Sandbox.create(template, d.opts(extra)) : await Sandbox.create(d.opts(extra));
  live.push(sbx);
  return sbx;
}

async function listIds(opts) {
  const p = Sandbox.list(opts);
  const ids = [];
  while (p.hasNext) for (const s of await p.nextItems()) ids.push(s.sandboxId);
  return ids;
}

before(async () => {
  d = await startDaemon();
});

after(async () => {
  for (const s of live) await Sandbox.kill(s.sandboxId, d.opts()).catch(() => {});
  await d.stop();
});

describe('control plane', () => {
  test('create: an ordinary session (runbox session ls shows it, of tenant acme)', async () => {
    const sbx = await create({ metadata: { suite: 'sdk' } });
    assert.match(sbx.sandboxId, /^[0-9a-f]{32}$/);
    const ls = runbox(['session', 'ls', '--socket', d.sock]);
    const line = ls.split('\n').find((l) => l.startsWith(sbx.sandboxId));
    assert.ok(line, `session ls lists ${sbx.sandboxId}: ${ls}`);
    assert.match(line, /tenant acme/);
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.templateId, 'base');
    assert.deepEqual(info.metadata, { suite: 'sdk' });
    assert.equal(info.envdVersion, '0.5.7');
    const uid = /^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${d.pid}/status`, 'utf8'))[1];
    assert.equal(Number(uid), d.uid ?? 0, 'the daemon runs as the mode\'s user');
  });

  test('Sandbox.list: the tenant\'s sandboxes, filtered by metadata; not another tenant\'s', async () => {
    const a = await create({ metadata: { team: 'red' } });
    const b = await create({ metadata: { team: 'blue' } });
    const all = await listIds(d.opts());
    assert.ok(all.includes(a.sandboxId) && all.includes(b.sandboxId));
    const red = await listIds(d.opts({ query: { metadata: { team: 'red' } } }));
    assert.ok(red.includes(a.sandboxId), 'the matching one is listed');
    assert.ok(!red.includes(b.sandboxId), 'the other metadata is filtered out');
    const other = await listIds(d.opts({ apiKey: d.otherKey }));
    assert.ok(!other.includes(a.sandboxId), 'tenant other does not see tenant acme\'s sandbox');
    assert.equal(await Sandbox.kill(a.sandboxId, d.opts({ apiKey: d.otherKey })), false,
      'tenant other cannot kill it (not found)');
    assert.ok((await listIds(d.opts())).includes(a.sandboxId), 'it still runs');
  });

  test('a wrong API key is refused with AuthenticationError; the right one is served', async () => {
    const bad = d.opts({ apiKey: 'e2b_' + '0'.repeat(40) });
    await assert.rejects(Sandbox.create(bad), AuthenticationError);
    await assert.rejects(listIds(bad), AuthenticationError);
    const res = await fetch(`${d.url}/v2/sandboxes`, { headers: { 'X-API-Key': 'e2b_nope' } });
    assert.equal(res.status, 401);
    const body = await res.json();
    assert.equal(body.code, 401);
    assert.equal(typeof body.message, 'string');
    const okRes = await fetch(`${d.url}/v2/sandboxes`, { headers: { 'X-API-Key': d.key } });
    assert.equal(okRes.status, 200);
    assert.ok(Array.isArray(await okRes.json()));
  });

  test('errors are JSON {code, message}: an unknown sandbox is 404, an unknown template 400', async () => {
    const res = await fetch(`${d.url}/sandboxes/${'f'.repeat(32)}`, { headers: { 'X-API-Key': d.key } });
    assert.equal(res.status, 404);
    assert.equal((await res.json()).code, 404);
    await assert.rejects(Sandbox.create('no-such-image', d.opts()), /400/);
  });

  test('connect: a second handle reaches the same sandbox', async () => {
    const sbx = await create();
    await sbx.commands.run('echo kept > /workspace/kept');
    const again = await Sandbox.connect(sbx.sandboxId, d.opts());
    assert.equal((await again.commands.run('cat /workspace/kept')).stdout, 'kept\n');
    const other = await create();
    await assert.rejects(other.commands.run('cat /workspace/kept'), CommandExitError,
      'another sandbox does not have the file');
    await assert.rejects(Sandbox.connect(sbx.sandboxId, d.opts({ apiKey: d.otherKey })),
      'another tenant cannot connect');
  });

  test('kill: the session ends (gone from session ls and Sandbox.list)', async () => {
    const sbx = await create();
    const keep = await create();
    assert.equal(await sbx.kill(), true);
    assert.ok(!runbox(['session', 'ls', '--socket', d.sock]).includes(sbx.sandboxId));
    assert.ok(!(await listIds(d.opts())).includes(sbx.sandboxId));
    assert.equal(await Sandbox.kill(sbx.sandboxId, d.opts()), false, 'a second kill finds nothing');
    assert.equal(await sbx.isRunning(), false, 'envd answers it is gone');
    assert.equal(await keep.isRunning(), true, 'the control still runs');
  });

  test('setTimeout: a sandbox ends at its timeout; one with a longer timeout keeps running', async () => {
    const short = await create();
    const long = await create();
    await long.setTimeout(120000);
    const before1 = (await short.getInfo()).endAt.getTime();
    const runOf = (id) => / run (\S+)/.exec(runbox(['session', 'ls', '--socket', d.sock]).split('\n')
      .find((l) => l.startsWith(id)))[1];
    const shortRun = runOf(short.sandboxId);
    const longRun = runOf(long.sandboxId);
    await short.setTimeout(1000);
    assert.ok((await short.getInfo()).endAt.getTime() < before1, 'endAt moved');
    let gone = false;
    for (let i = 0; i < 50 && !gone; i++) {
      await new Promise((r) => setTimeout(r, 200));
      gone = !(await listIds(d.opts())).includes(short.sandboxId);
    }
    assert.ok(gone, 'the short one was killed at its timeout');
    assert.ok(!runbox(['session', 'ls', '--socket', d.sock]).includes(short.sandboxId), 'its session closed');
    assert.equal((await long.commands.run('echo alive')).stdout, 'alive\n');
    // Both timeouts are events of their runs, and the reaped one's end names its reason.
    const events = (run) => JSON.parse(runbox(['ledger', '--state-dir', d.state, 'query', '--run', run, '--json']));
    const ev = events(shortRun);
    const timeouts = ev.filter((e) => e.type === 'e2b_timeout').map((e) => e.data.timeout_s);
    assert.deepEqual(timeouts, [1], 'the short sandbox\'s setTimeout(1000) is recorded as 1 s');
    const cleanup = ev.find((e) => e.type === 'cleanup');
    assert.ok(cleanup && JSON.stringify(cleanup.data).includes('e2b timeout'), `cleanup names the reason: ${JSON.stringify(cleanup)}`);
    const longEv = events(longRun);
    assert.deepEqual(longEv.filter((e) => e.type === 'e2b_timeout').map((e) => e.data.timeout_s), [120],
      'the control: the long one\'s setTimeout is its own event');
    assert.ok(!longEv.some((e) => e.type === 'cleanup'), 'and it has not ended');
  });
});

describe('the v1 paths and the native view', () => {
  test('POST /sandboxes (v1) answers 201 with the ids and the token; v1 connect answers the same sandbox', async () => {
    const res = await fetch(`${d.url}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': d.key,
      'Content-Type': 'application/json' }, body: JSON.stringify({ templateID: 'base', timeout: 60 }) });
    assert.equal(res.status, 201);
    const b = await res.json();
    assert.match(b.sandboxID, /^[0-9a-f]{32}$/);
    assert.equal(b.templateID, 'base');
    assert.equal(b.envdVersion, '0.5.7');
    assert.equal(typeof b.clientID, 'string');
    assert.match(b.envdAccessToken, /^[0-9a-f]{64}$/);
    live.push({ sandboxId: b.sandboxID });
    const c = await fetch(`${d.url}/sandboxes/${b.sandboxID}/connect`, { method: 'POST', headers: {
      'X-API-Key': d.key, 'Content-Type': 'application/json' }, body: JSON.stringify({ timeout: 60 }) });
    assert.equal(c.status, 200);
    assert.equal((await c.json()).envdAccessToken, b.envdAccessToken);
    const bad = await fetch(`${d.url}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': d.key },
      body: JSON.stringify({ templateID: 'base', volumeMounts: [{ name: 'v', path: '/v' }] }) });
    assert.equal(bad.status, 400, 'a feature runbox lacks is refused by name');
    assert.match((await bad.json()).message, /volumeMounts/);
  });

  test('a body is kept only for a caller its headers name: an unknown one\'s is read and dropped, not held', async () => {
    const res = await fetch(`${d.url}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': d.key,
      'Content-Type': 'application/json' }, body: JSON.stringify({ templateID: 'base', timeout: 60 }) });
    assert.equal(res.status, 201);
    const b = await res.json();
    live.push({ sandboxId: b.sandboxID });
    const hwm = () => Number(/^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${d.pid}/status`, 'utf8'))[1]) * 1024;
    // A multipart upload of four 7 MiB files, as the SDK sends several.
    const post = (token) => {
      const form = new FormData();
      for (let i = 0; i < 4; i++)
        form.append('file', new Blob([Buffer.alloc(7 << 20, 0x61 + i)]), `/workspace/big${i}.bin`);
      return fetch(`${d.url}/files`, { method: 'POST', headers: {
        'E2b-Sandbox-Id': b.sandboxID, 'X-Access-Token': token }, body: form });
    };
    const h0 = hwm();
    const wrong = await post('0'.repeat(64));
    assert.equal(wrong.status, 401);
    const bad = await fetch(`${d.url}/v2/sandboxes`, { method: 'POST', headers: { 'X-API-Key': 'e2b_nope',
      'Content-Type': 'application/json' }, body: Buffer.alloc(900 << 10, 0x20) });
    assert.equal(bad.status, 401);
    const h1 = hwm();
    assert.ok(h1 - h0 < (12 << 20), `the daemon's peak grew ${(h1 - h0) >> 20} MiB for 28 MiB of an unknown caller's body`);
    // Control: the sandbox's own token's upload is taken, every file of it.
    const right = await post(b.envdAccessToken);
    assert.equal(right.status, 200);
    assert.deepEqual((await right.json()).map((f) => f.path), [0, 1, 2, 3].map((i) => `/workspace/big${i}.bin`));
    const ls = await fetch(`${d.url}/filesystem.Filesystem/ListDir`, { method: 'POST', headers: {
      'E2b-Sandbox-Id': b.sandboxID, 'X-Access-Token': b.envdAccessToken, 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/workspace', depth: 1 }) });
    const sizes = Object.fromEntries((await ls.json()).entries.map((e) => [e.name, Number(e.size)]));
    for (let i = 0; i < 4; i++) assert.equal(sizes[`big${i}.bin`], 7 << 20, `big${i}.bin was written whole`);
  });

  test('an unknown caller that stops sending holds its connection for seconds, not minutes', async () => {
    const port = Number(new URL(d.url).port);
    const t0 = Date.now();
    const closed = await new Promise((ok) => {
      const c = net.connect(port, '127.0.0.1', () =>
        c.write('POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-Key: e2b_nope\r\nContent-Length: 1000000000\r\n\r\nab'));
      c.on('data', () => {});
      c.on('error', () => {});
      c.on('close', () => ok(Date.now() - t0));
      setTimeout(() => { c.destroy(); ok(null); }, 30000);
    });
    assert.ok(closed !== null && closed < 15000, `the daemon closed the idle unknown caller after ${closed} ms`);
    // Control: a caller with the key is served meanwhile and after.
    const r = await fetch(`${d.url}/v2/sandboxes`, { headers: { 'X-API-Key': d.key } });
    assert.equal(r.status, 200);
  });

  test('a started process keeps only what List shows of its config: starts with a large unknown key leave the daemon\'s peak flat', async () => {
    const res = await fetch(`${d.url}/sandboxes`, { method: 'POST', headers: { 'X-API-Key': d.key,
      'Content-Type': 'application/json' }, body: JSON.stringify({ templateID: 'base', timeout: 120 }) });
    assert.equal(res.status, 201);
    const b = await res.json();
    live.push({ sandboxId: b.sandboxID });
    const hwm = () => Number(/^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${d.pid}/status`, 'utf8'))[1]) * 1024;
    const headers = { 'E2b-Sandbox-Id': b.sandboxID, 'X-Access-Token': b.envdAccessToken };
    // Process.Start is a server stream: one Connect envelope (flags, length, JSON) each way.
    const start = async (process, tag) => {
      const j = Buffer.from(JSON.stringify({ process, ...(tag ? { tag } : {}) }));
      const head = Buffer.alloc(5);
      head.writeUInt32BE(j.length, 1);
      const r = await fetch(`${d.url}/process.Process/Start`, { method: 'POST', headers: { ...headers,
        'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1' }, body: Buffer.concat([head, j]) });
      assert.equal(r.status, 200);
      return Buffer.from(await r.arrayBuffer()).toString();
    };
    const junk = new Array(300000).fill(0); // ~600 KB of JSON, ~13x that once parsed
    await start({ cmd: '/bin/true', args: [], x: junk });
    const h0 = hwm();
    for (let i = 0; i < 12; i++) await start({ cmd: '/bin/true', args: [], x: junk });
    const h1 = hwm();
    assert.ok(h1 - h0 < (48 << 20), `the daemon's peak grew ${(h1 - h0) >> 20} MiB over 12 starts`);
    // What List shows of a running one: its cmd, args, envs, cwd, never the unknown key.
    start({ cmd: '/bin/sh', args: ['-c', 'sleep 30'], envs: { A: '1' }, x: junk }, 'kept');
    let listed;
    for (let i = 0; i < 100 && !listed; i++) {
      const r = await fetch(`${d.url}/process.Process/List`, { method: 'POST', headers: { ...headers,
        'Content-Type': 'application/json' }, body: '{}' });
      listed = (await r.json()).processes.find((p) => p.tag === 'kept');
      if (!listed) await new Promise((ok) => setTimeout(ok, 50));
    }
    assert.ok(listed, 'the running process is listed');
    assert.deepEqual(listed.config, { cmd: '/bin/sh', args: ['-c', 'sleep 30'], envs: { A: '1' } });
  });

  test('a session closed natively (runbox session rm) is gone for E2B too', async () => {
    const sbx = await create();
    const keep = await create();
    runbox(['session', 'rm', '--socket', d.sock, sbx.sandboxId]);
    assert.equal(await sbx.isRunning(), false, 'envd says it is gone before anything else asked');
    assert.ok(!(await listIds(d.opts())).includes(sbx.sandboxId));
    await assert.rejects(sbx.getInfo(), /not found/i);
    assert.equal(await sbx.isRunning(), false, 'envd answers it is gone');
    assert.equal(await keep.isRunning(), true);
    assert.ok((await listIds(d.opts())).includes(keep.sandboxId), 'the control is still listed');
  });
});

describe('the daemon\'s own checks', () => {
  const start = (keys, listen) => spawnSync(...command(['serve', '--socket', path.join(d.dir, 'x.sock'),
    '--state-dir', d.state, '--e2b-listen', listen, '--e2b-keys', keys]), { encoding: 'utf8', timeout: 20000 });

  test('a keys file others may read is refused at start; a 0600 one is taken (the running daemon)', () => {
    const loose = path.join(d.dir, 'loose.json');
    fs.writeFileSync(loose, JSON.stringify({ ['e2b_' + 'a'.repeat(40)]: { tenant: 'acme' } }), { mode: 0o644 });
    fs.chmodSync(loose, 0o644);
    const r = start(loose, '127.0.0.1:0');
    assert.equal(r.status, 125);
    assert.match(r.stderr, /mode 0644, must be 0600/);
    assert.match(fs.statSync(path.join(d.dir, 'keys.json')).mode.toString(8), /600$/, 'the daemon\'s own is 0600');
  });

  test('--e2b-listen takes loopback only', () => {
    const r = start(path.join(d.dir, 'keys.json'), '0.0.0.0:0');
    assert.equal(r.status, 125);
    assert.match(r.stderr, /only a loopback address/);
  });
});

describe('commands', () => {
  let sbx;
  before(async () => {
    sbx = await create({ envs: { SANDBOX_VAR: 'from-create' } });
  });

  test('run streams stdout and stderr to the callbacks as they come', async () => {
    const out = [];
    const err = [];
    const t0 = Date.now();
    let firstOut = 0;
    const r = await sbx.commands.run('echo one; echo oops >&2; sleep 1; echo two', {
      onStdout: (s) => { if (!firstOut) firstOut = Date.now(); out.push(s); },
      onStderr: (s) => err.push(s),
    });
    const end = Date.now();
    assert.equal(r.exitCode, 0);
    assert.equal(out.join(''), 'one\ntwo\n');
    assert.equal(err.join(''), 'oops\n');
    assert.equal(r.stdout, 'one\ntwo\n');
    assert.equal(r.stderr, 'oops\n');
    assert.ok(out.length >= 2, 'two writes a second apart arrive as two chunks');
    assert.ok(end - firstOut >= 700, `the first line came before the sleep ended (${firstOut - t0} ms of ${end - t0})`);
  });

  test('large and non-UTF-8 output arrive whole, byte for byte', async () => {
    const big = await sbx.commands.run('head -c 1000000 /dev/zero | tr "\\0" a; echo; printf end >&2');
    assert.equal(big.stdout.length, 1000001);
    assert.ok(/^a+\n$/.test(big.stdout), 'every byte an a');
    assert.equal(big.stderr, 'end');
    const chunks = [];
    await sbx.commands.run("printf 'x\\377\\376y'", { onStdout: (t) => chunks.push(t) });
    assert.equal(chunks.join(''), 'x\ufffd\ufffdy', 'bytes that are not UTF-8 pass (as base64 inside)');
  });

  test('a non-zero exit is CommandExitError with its code and output; exit 0 resolves', async () => {
    await assert.rejects(sbx.commands.run('echo failing >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr, 'failing\n');
      return true;
    });
    assert.equal((await sbx.commands.run('exit 0')).exitCode, 0);
  });

  test('as E2B runs them: a login bash, envs, cwd, the home /workspace, sandbox envVars', async () => {
    const r = await sbx.commands.run('echo "$FOO|$SANDBOX_VAR|$HOME|$(pwd)|${BASH_VERSION:+bash}"',
      { envs: { FOO: 'bar' }, cwd: '/tmp' });
    assert.equal(r.stdout, 'bar|from-create|/workspace|/tmp|bash\n');
    const dflt = await sbx.commands.run('echo "$FOO|$(pwd)"');
    assert.equal(dflt.stdout, '|/workspace\n', 'without envs and cwd: none, and the home');
    assert.equal((await sbx.commands.run('echo $USER', { user: 'root' })).stdout, 'root\n');
    assert.equal((await sbx.commands.run('echo $USER')).stdout, 'user\n');
    await assert.rejects(sbx.commands.run('echo no', { user: 'mallory' }), /user/);
    await assert.rejects(sbx.commands.run('pwd', { cwd: '/no/such/dir' }), InvalidArgumentError,
      'a cwd that does not exist is a start error, as envd gives it');
  });

  test('an image without bash gets sh for the same call', async () => {
    const small = await create({}, 'minimal');
    const r = await small.commands.run('echo "$0" "${BASH_VERSION:-nobash}"');
    assert.equal(r.stdout, '/bin/sh nobash\n');
    const again = await small.commands.run('echo second');
    assert.equal(again.stdout, 'second\n');
  });

  test('a background command is listed, killed, and waits as killed; another ends by itself', async () => {
    const bg = await sbx.commands.run('sleep 60', { background: true });
    assert.ok(bg.pid > 0);
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'listed while it runs');
    const done = await sbx.commands.run('sleep 0.2; echo finished', { background: true });
    assert.equal(await bg.kill(), true);
    await assert.rejects(bg.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === bg.pid), 'gone from the list');
    const r = await done.wait();
    assert.equal(r.stdout, 'finished\n');
    assert.equal(await sbx.commands.kill(bg.pid), false, 'killing one that ended finds nothing');
  });

  test('stdin: sendStdin and closeStdin reach the process', async () => {
    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    await sbx.commands.sendStdin(cat.pid, 'through stdin\n');
    await sbx.commands.closeStdin(cat.pid);
    assert.equal((await cat.wait()).stdout, 'through stdin\n');
  });

  test('timeoutMs ends a command that runs longer (TimeoutError); a shorter one completes', async () => {
    await assert.rejects(sbx.commands.run('sleep 20', { timeoutMs: 800 }), TimeoutError);
    assert.equal((await sbx.commands.run('sleep 0.1; echo in-time', { timeoutMs: 10000 })).stdout, 'in-time\n');
  });

  test('each command is the session\'s ledger event, with its exact text', async () => {
    const mark = `ledger-mark-${Date.now()}`;
    await sbx.commands.run(`echo ${mark}`);
    const ls = runbox(['session', 'ls', '--socket', d.sock]);
    const run = / run (\S+)/.exec(ls.split('\n').find((l) => l.startsWith(sbx.sandboxId)))[1];
    const ev = JSON.parse(runbox(['ledger', '--state-dir', d.state, 'query', '--run', run, '--type', 'step_start',
      '--json']));
    assert.ok(JSON.stringify(ev).includes(`echo ${mark}`), 'the command text is recorded');
    assert.ok(!JSON.stringify(ev).includes(`echo ${mark}-never`), 'and not one that never ran');
  });

  test('output passes the scrubber as the native API\'s does: the run token is redacted', async () => {
    const tok = await sbx.commands.run('printenv RUNBOX_TOKEN | wc -c; printenv RUNBOX_TOKEN');
    const [len, shown] = tok.stdout.split('\n');
    assert.ok(Number(len) > 16, 'the sandbox holds a run token');
    assert.match(shown, /^\[REDACTED:[^\]]*run-token[^\]]*\]$/, 'what leaves is the redaction, not the token');
    assert.equal((await sbx.commands.run('printenv HOME')).stdout, '/workspace\n', 'the control leaves as it is');
  });

  test('PTY terminals are refused, not faked', async () => {
    await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }), /PTY|unimplemented/i);
  });
});

describe('files', () => {
  let sbx;
  before(async () => {
    sbx = await create();
  });

  test('write then read; a command sees the file; read of a missing file fails', async () => {
    const info = await sbx.files.write('/workspace/notes/a.txt', 'hello file\n');
    assert.equal(info.path, '/workspace/notes/a.txt');
    assert.equal(await sbx.files.read('/workspace/notes/a.txt'), 'hello file\n');
    assert.equal(await sbx.files.read('notes/a.txt'), 'hello file\n', 'a relative path is from the home');
    assert.equal((await sbx.commands.run('cat /workspace/notes/a.txt')).stdout, 'hello file\n');
    await sbx.commands.run('printf made-inside > /workspace/inside.txt');
    assert.equal(await sbx.files.read('/workspace/inside.txt'), 'made-inside');
    await assert.rejects(sbx.files.read('/workspace/missing.txt'), FileNotFoundError);
  });

  test('write of bytes and of several files (multipart)', async () => {
    const bytes = new Uint8Array([0, 1, 2, 255, 10]);
    await sbx.files.write('/workspace/bin.dat', bytes.buffer);
    assert.deepEqual(await sbx.files.read('/workspace/bin.dat', { format: 'bytes' }), bytes);
    const res = await sbx.files.write([{ path: '/workspace/m1.txt', data: 'one' }, { path: '/workspace/m2.txt', data: 'two' }]);
    assert.equal(res.length, 2);
    assert.equal((await sbx.commands.run('cat /workspace/m1.txt /workspace/m2.txt')).stdout, 'onetwo');
  });

  test('exists: true for a file written, false for one that is not', async () => {
    await sbx.files.write('/workspace/there.txt', 'x');
    assert.equal(await sbx.files.exists('/workspace/there.txt'), true);
    assert.equal(await sbx.files.exists('/workspace/not-there.txt'), false);
  });

  test('list: the entries of a directory, with their types', async () => {
    await sbx.commands.run('mkdir -p /workspace/lst/sub && printf 12345 > /workspace/lst/f.txt');
    const entries = await sbx.files.list('/workspace/lst');
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
    assert.deepEqual(Object.keys(byName).sort(), ['f.txt', 'sub']);
    assert.equal(byName['f.txt'].type, 'file');
    assert.equal(byName['f.txt'].size, 5);
    assert.equal(byName.sub.type, 'dir');
    await assert.rejects(sbx.files.list('/workspace/no-such-dir'), FileNotFoundError);
  });

  test('makeDir, rename, remove', async () => {
    assert.equal(await sbx.files.makeDir('/workspace/made/deep'), true);
    assert.equal(await sbx.files.makeDir('/workspace/made/deep'), false, 'a second makeDir says it exists');
    await sbx.files.write('/workspace/made/old.txt', 'moving');
    const moved = await sbx.files.rename('/workspace/made/old.txt', '/workspace/made/new.txt');
    assert.equal(moved.path, '/workspace/made/new.txt');
    assert.equal(await sbx.files.exists('/workspace/made/old.txt'), false);
    assert.equal(await sbx.files.read('/workspace/made/new.txt'), 'moving');
    await sbx.files.remove('/workspace/made');
    assert.equal(await sbx.files.exists('/workspace/made'), false);
  });

  test('what runbox does not serve is refused, not faked: gzip uploads, directory watching', async () => {
    await assert.rejects(sbx.files.write('/workspace/gz.txt', 'zipped', { gzip: true }), /uncompressed/);
    assert.equal(await sbx.files.exists('/workspace/gz.txt'), false, 'nothing was written');
    await sbx.files.write('/workspace/gz.txt', 'plain', { useOctetStream: true });
    assert.equal(await sbx.files.read('/workspace/gz.txt'), 'plain', 'the same write uncompressed (octet-stream)');
    await assert.rejects(sbx.files.watchDir('/workspace', () => {}), /unimplemented|not supported/i);
  });

  test('files stream to and from disk: 24 MiB up and down leave the daemon\'s peak under 8 MiB more; the bytes round-trip', async () => {
    const hwm = () => Number(/^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${d.pid}/status`, 'utf8'))[1]) * 1024;
    // The peak so far is forgotten (clear_refs 5 resets VmHWM), so an earlier one hides nothing.
    const fromNow = () => { fs.writeFileSync(`/proc/${d.pid}/clear_refs`, '5'); return hwm(); };
    const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
    const grew = (h0) => (hwm() - h0) >> 20;
    // One file of 24 MiB (multipart, as the SDK sends one), into a directory not there yet.
    const big = crypto.randomBytes(24 << 20);
    let h0 = fromNow();
    const info = await sbx.files.write('/workspace/streamed/big.bin', big);
    assert.equal(info.path, '/workspace/streamed/big.bin');
    assert.ok(grew(h0) < 8, `the upload of 24 MiB raised the daemon's peak by ${grew(h0)} MiB`);
    h0 = fromNow();
    const back = await sbx.files.read('/workspace/streamed/big.bin', { format: 'bytes' });
    assert.ok(grew(h0) < 8, `the download of 24 MiB raised the daemon's peak by ${grew(h0)} MiB`);
    assert.equal(back.length, big.length);
    assert.equal(sha(back), sha(big), 'the bytes read are the bytes written');
    assert.equal((await sbx.commands.run('sha256sum /workspace/streamed/big.bin')).stdout.split(' ')[0], sha(big),
      'the file in the sandbox is the upload');
    // Four 6 MiB files in one multipart body (the SDK's write of several), each its own file.
    const parts = [0, 1, 2, 3].map(() => crypto.randomBytes(6 << 20));
    h0 = fromNow();
    const res = await sbx.files.write(parts.map((data, i) => ({ path: `/workspace/streamed/p${i}.bin`, data })));
    assert.ok(grew(h0) < 8, `an upload of 4 x 6 MiB raised the daemon's peak by ${grew(h0)} MiB`);
    assert.deepEqual(res.map((r) => r.path), [0, 1, 2, 3].map((i) => `/workspace/streamed/p${i}.bin`));
    for (let i = 0; i < 4; i++)
      assert.equal(sha(await sbx.files.read(`/workspace/streamed/p${i}.bin`, { format: 'bytes' })), sha(parts[i]));
    // Control: a small file, and an empty one, round-trip the same way.
    await sbx.files.write('/workspace/streamed/small.txt', 'small');
    assert.equal(await sbx.files.read('/workspace/streamed/small.txt'), 'small');
    await sbx.files.write('/workspace/streamed/empty.txt', '');
    assert.equal(await sbx.files.read('/workspace/streamed/empty.txt'), '');
    await sbx.files.write('/workspace/streamed/octet.bin', new Blob([parts[0]]).stream(), { useOctetStream: true });
    assert.equal(sha(await sbx.files.read('/workspace/streamed/octet.bin', { format: 'bytes' })), sha(parts[0]),
      'an octet-stream upload (a stream) round-trips');
  });

  test('a multipart body cut short (no closing boundary) is refused, its file not kept; the whole body is written', async () => {
    const part = '--XX\r\nContent-Disposition: form-data; name="file"; filename="/workspace/cut.txt"\r\n\r\nhello';
    const post = (body) => fetch(`${d.url}/files`, { method: 'POST', body, headers: { 'E2b-Sandbox-Id': sbx.sandboxId,
      'X-Access-Token': sbx.envdAccessToken, 'Content-Type': 'multipart/form-data; boundary=XX' } });
    const cut = await post(part);
    assert.equal(cut.status, 400);
    assert.match((await cut.json()).message, /cut short/);
    assert.equal(await sbx.files.exists('/workspace/cut.txt'), false, 'nothing was kept');
    const whole = await post(`${part}\r\n--XX--\r\n`);
    assert.equal(whole.status, 200);
    assert.equal(await sbx.files.read('/workspace/cut.txt'), 'hello');
  });

  test('a file write is the session\'s ledger event (file_write)', async () => {
    await sbx.files.write('/workspace/ledgered.txt', 'recorded');
    const ls = runbox(['session', 'ls', '--socket', d.sock]);
    const run = / run (\S+)/.exec(ls.split('\n').find((l) => l.startsWith(sbx.sandboxId)))[1];
    const ev = JSON.parse(runbox(['ledger', '--state-dir', d.state, 'query', '--run', run, '--type', 'file_write',
      '--json']));
    assert.ok(JSON.stringify(ev).includes('/workspace/ledgered.txt'));
  });
});

describe('envd access', () => {
  test('only envd\'s port is served: another port of the sandbox is 502 (code-interpreter\'s Jupyter)', async () => {
    const sbx = await create();
    const h = (port) => ({ 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port),
      'X-Access-Token': sbx.envdAccessToken });
    assert.equal((await fetch(`${d.url}/health`, { headers: h(49999) })).status, 502);
    assert.equal((await fetch(`${d.url}/health`, { headers: h(49983) })).status, 204);
  });

  test('a wrong access token is refused; the sandbox\'s own is served', async () => {
    const sbx = await create();
    await sbx.files.write('/workspace/t.txt', 'token-guarded');
    const wrong = new Sandbox({ ...d.opts(), sandboxId: sbx.sandboxId, envdAccessToken: 'f'.repeat(64),
      envdVersion: '0.5.7' });
    await assert.rejects(wrong.commands.run('echo hi'), AuthenticationError);
    await assert.rejects(wrong.files.read('/workspace/t.txt'), AuthenticationError);
    const right = new Sandbox({ ...d.opts(), sandboxId: sbx.sandboxId, envdAccessToken: sbx.envdAccessToken,
      envdVersion: '0.5.7' });
    assert.equal(await right.files.read('/workspace/t.txt'), 'token-guarded');
    assert.equal((await right.commands.run('echo hi')).stdout, 'hi\n');
  });

  test('a forged E2b-Sandbox-Id cannot reach another sandbox\'s files or commands', async () => {
    const a = await create();
    const b = await create();
    await b.files.write('/workspace/secret.txt', 'b-only');
    // A's token, B's id: what a client of A would send to reach B.
    const forged = new Sandbox({ ...d.opts(), sandboxId: b.sandboxId, envdAccessToken: a.envdAccessToken,
      envdVersion: '0.5.7' });
    await assert.rejects(forged.files.read('/workspace/secret.txt'), AuthenticationError);
    await assert.rejects(forged.commands.run('cat /workspace/secret.txt'), AuthenticationError);
    const raw = (id, token) => fetch(`${d.url}/files?path=/workspace/secret.txt`,
      { headers: { 'E2b-Sandbox-Id': id, 'X-Access-Token': token } });
    assert.equal((await raw(b.sandboxId, a.envdAccessToken)).status, 401);
    const ok = await raw(b.sandboxId, b.envdAccessToken);
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), 'b-only');
    await assert.rejects(a.files.read('/workspace/secret.txt'), FileNotFoundError, 'A has no such file of its own');
  });
});
