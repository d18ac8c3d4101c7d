// The client's contract with the SDK, each property against a control: yield time and
// write_stdin, maxOutputTokens through the SDK's formatter, no pty, exposed ports, and
// serialized state treated as untrusted (shape checked, nothing but run id and snapshot ref).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { once } from 'node:events';
import { Manifest, file, SandboxUnsupportedFeatureError, SandboxConfigurationError, SandboxArchiveError } from '@openai/agents/sandbox';
import { RunboxSandboxClient, RunboxServeError } from '../src/index.js';
import { Serve, marker, tarOf } from './helpers.js';

let serve: Serve;
before(async () => {
  serve = await Serve.start();
});
after(async () => {
  await serve?.stop();
});

function outputOf(formatted: string): string {
  const i = formatted.indexOf('Output:\n');
  return i < 0 ? '' : formatted.slice(i + 'Output:\n'.length);
}

test('exec yields after yieldTimeMs with a session id; writeStdin collects the rest', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    // The command cannot end before the yield (it waits for a file only the test makes), so
    // the call must come back with a session number and no exit code.
    const first = await s.exec({ cmd: 'echo early; while [ ! -e go ]; do sleep 0.05; done; echo late', yieldTimeMs: 500 });
    assert.equal(typeof first.sessionId, 'number');
    assert.equal(first.exitCode, undefined);
    assert.ok('early\n'.startsWith(first.output), `only what came before the yield: ${JSON.stringify(first.output)}`);
    await s.writeFile('go', '');
    const rest = await s.writeStdin({ sessionId: first.sessionId!, yieldTimeMs: 30_000 });
    assert.match(rest, /Process exited with code 0/);
    assert.equal(first.output + outputOf(rest), 'early\nlate\n');
    // Control: a command that ends within the yield time returns its exit code at once.
    const quick = await s.exec({ cmd: 'echo now; exit 4', yieldTimeMs: 10_000 });
    assert.deepEqual([quick.exitCode, quick.sessionId, quick.output], [4, undefined, 'now\n']);
    // An unknown session id is said in the SDK's format.
    assert.match(await s.writeStdin({ sessionId: 999 }), /session not found: 999/);
  } finally {
    await s.close();
    client.close();
  }
});

test('an interactive (tty) exec takes stdin through writeStdin; a plain one reads /dev/null', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    const r = await s.exec({ cmd: 'read line; echo "got $line"', tty: true, yieldTimeMs: 300 });
    assert.equal(typeof r.sessionId, 'number');
    const out = await s.writeStdin({ sessionId: r.sessionId!, chars: 'hello\n', yieldTimeMs: 10_000 });
    assert.equal(outputOf(out), 'got hello\n');
    // Control: without tty the same read meets end of input at once.
    const plain = await s.exec({ cmd: 'read line; echo "rc=$? [$line]"', yieldTimeMs: 10_000 });
    assert.deepEqual([plain.exitCode, plain.output], [0, 'rc=1 []\n']);
  } finally {
    await s.close();
    client.close();
  }
});

test('maxOutputTokens truncates through the SDK formatter; without it the output is whole', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    const cut = await s.execCommand({ cmd: 'seq 1 20000', maxOutputTokens: 20 });
    assert.match(cut, /Original token count: \d+/);
    assert.ok(outputOf(cut).length < 400, `truncated (${outputOf(cut).length} chars)`);
    const whole = await s.execCommand({ cmd: 'seq 1 20000' });
    assert.doesNotMatch(whole, /Original token count/);
    assert.ok(outputOf(whole).endsWith('19999\n20000\n'));
  } finally {
    await s.close();
    client.close();
  }
});

test('an exposed port reaches a server inside with its query only; outside 3000-9999 is refused', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    const m = marker();
    await s.exec({ cmd: `mkdir -p /tmp/www && echo ${m} >/tmp/www/hello.txt`, yieldTimeMs: 10000 });
    await s.exec({ cmd: 'exec httpd -f -p 127.0.0.1:3000 -h /tmp/www', yieldTimeMs: 200 });
    const ep = await s.resolveExposedPort(3000);
    assert.equal(ep.host, '127.0.0.1');
    assert.match(ep.query ?? '', /^runbox_token=[0-9a-f]{32,}$/);
    assert.deepEqual(await s.resolveExposedPort(3000), ep); // the same endpoint again
    const url = (path: string, q?: string) => `http://${ep.host}:${ep.port}${path}${q ? `?${q}` : ''}`;
    let body = '';
    for (let i = 0; i < 50 && body.trim() !== m; i++) {
      const r = await fetch(url('/hello.txt', ep.query));
      body = r.status === 200 ? await r.text() : '';
      if (body.trim() !== m) await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(body.trim(), m);
    // Control: the same URL without the query is refused.
    const bare = await fetch(url('/hello.txt'));
    assert.equal(bare.status, 401);
    assert.doesNotMatch(await bare.text(), new RegExp(m));
    await assert.rejects(s.resolveExposedPort(80), SandboxConfigurationError);
    await assert.rejects(s.resolveExposedPort(10000), SandboxConfigurationError);
  } finally {
    await s.close();
    client.close();
  }
});

test('no pty: the SDK is told, not misled', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    assert.equal(s.supportsPty(), false);
    await assert.rejects(s.exec({ cmd: 'true', runAs: 'nobody' }), SandboxUnsupportedFeatureError);
    // Control: the same session runs a command.
    assert.equal((await s.exec({ cmd: 'true' })).exitCode, 0);
  } finally {
    await s.close();
    client.close();
  }
});

test('serialized state is untrusted: its shape is checked and only run id and snapshot ref are kept', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'alpha', agent: 'a1' });
  const s = await client.create({ manifest: new Manifest({ entries: { 'f.txt': file({ content: 'x' }) } }) });
  try {
    const ser = await client.serializeSessionState(s.state);
    assert.deepEqual(Object.keys(ser).sort(), ['runId', 'snapshotRef']);
    for (const bad of [
      { runId: '../../x' },
      { runId: 42 },
      { runId: s.state.runId, snapshotRef: 'sha256:../../etc' },
      { runId: s.state.runId, snapshotRef: { path: '/etc/passwd' } },
      { runId: s.state.runId, manifest: 'nope' },
    ]) {
      await assert.rejects(client.deserializeSessionState(bad as Record<string, unknown>), SandboxConfigurationError, JSON.stringify(bad));
    }
    // Keys a caller slipped in (a session id, an environment) are dropped.
    const st = await client.deserializeSessionState({ ...ser, sessionId: 'f'.repeat(32), environment: { X: 'y' } });
    assert.equal(st.sessionId, '');
    assert.deepEqual(st.environment, {});

    // Control: this client's own live run is reconnected (same session).
    const again = await client.resume(await client.deserializeSessionState(ser));
    assert.equal(again.state.sessionId, s.state.sessionId);
    // Another tenant's client given the same run id does not reach that live session: it gets
    // a fresh sandbox of its own. (Whether a snapshot ref crosses tenants is the daemon's to
    // refuse; this state carries none.)
    for (const tenant of ['beta', undefined]) {
      const other = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant, agent: 'a1' });
      const theirs = await other.resume(await other.deserializeSessionState({ runId: ser.runId }));
      try {
        assert.notEqual(theirs.state.sessionId, s.state.sessionId, `tenant ${tenant}`);
        assert.notEqual(theirs.state.runId, s.state.runId);
        assert.equal(await theirs.pathExists('f.txt'), false);
      } finally {
        await theirs.close();
        other.close();
      }
    }
  } finally {
    await s.close();
    client.close();
  }
});

test('{ url, key }: calls carry the bearer key; a daemon that refuses it is an error with its status', async () => {
  const key = marker();
  const seen: string[] = [];
  const srv = http.createServer((req, res) => {
    seen.push(String(req.headers.authorization));
    if (req.headers.authorization !== `Bearer ${key}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad key"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"sessions":[]}');
  });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as { port: number }).port;
  try {
    const good = new RunboxSandboxClient({ url: `http://127.0.0.1:${port}`, key, image: 'minimal' });
    const bad = new RunboxSandboxClient({ url: `http://127.0.0.1:${port}`, key: 'wrong', image: 'minimal' });
    // resume lists sessions first: with the right key it gets that far (then no POST route: 401).
    const state = await good.deserializeSessionState({ runId: '0'.repeat(20) });
    await assert.rejects(bad.resume(state), (e: unknown) => e instanceof RunboxServeError && e.status === 401);
    assert.deepEqual(seen, ['Bearer wrong']);
    await assert.rejects(good.resume(state)); // the fake has no POST /v1/sessions
    assert.equal(seen[1], `Bearer ${key}`);
    good.close();
    bad.close();
    assert.throws(() => new RunboxSandboxClient({ url: 'https://example.invalid', key }), /http:\/\//);
  } finally {
    srv.close();
  }
});

test('hydrate refuses an archive that leaves /workspace or is over the limit; a good one lands', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    for (const bad of [
      [{ name: '../escape.txt', content: 'x' }],
      [{ name: '/abs.txt', content: 'x' }],
      [{ name: 'up', type: '2' as const, link: '../../..' }, { name: 'up/etc/x', content: 'x' }],
    ]) {
      await assert.rejects(s.hydrateWorkspace(tarOf(bad)), SandboxArchiveError, JSON.stringify(bad));
    }
    const escaped = await s.execCommand({ cmd: 'ls /escape.txt /abs.txt /workspace/abs.txt /etc/x 2>/dev/null; echo end' });
    assert.equal(outputOf(escaped), 'end\n');
    const good = tarOf([{ name: 'dir', type: '5' }, { name: 'dir/a.txt', content: 'landed' }]);
    await assert.rejects(s.hydrateWorkspace(good, { archiveLimits: { maxInputBytes: 100 } }), SandboxArchiveError);
    assert.equal(await s.pathExists('dir/a.txt'), false);
    // Control: the same good archive within the limits lands.
    await s.hydrateWorkspace(good);
    assert.equal(new TextDecoder().decode(await s.readFile({ path: 'dir/a.txt' })), 'landed');
  } finally {
    await s.close();
    client.close();
  }
});

test('readFile maxBytes reads a prefix; without it the whole file; the editor refuses a file over its cap', async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal' });
  const s = await client.create();
  try {
    await s.writeFile('big.txt', 'x'.repeat(300_000) + 'END');
    assert.equal((await s.readFile({ path: 'big.txt', maxBytes: 10 })).byteLength, 10);
    const whole = await s.readFile({ path: 'big.txt' });
    assert.equal(whole.byteLength, 300_003);
    assert.equal(new TextDecoder().decode(whole.subarray(-3)), 'END');
    // The session still answers after a read cut short.
    assert.equal((await s.exec({ cmd: 'true' })).exitCode, 0);
    await s.execCommand({ cmd: 'head -c 10485761 /dev/zero | tr "\\0" a > huge.txt' });
    await assert.rejects(
      s.createEditor().updateFile({ type: 'update_file', path: 'huge.txt', diff: '@@\n-a\n+b\n' }),
      /larger than/,
    );
    assert.equal((await s.stat('huge.txt'))?.size, 10485761, 'the file over the cap is left as it was');
  } finally {
    await s.close();
    client.close();
  }
});
