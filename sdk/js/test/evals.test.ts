// The seed-003 evaluation items on runbox through the SDK client, each with its control: a
// permitted path is readable and a forbidden one is not; a read-only input cannot be changed;
// a snapshot restores artifacts without ephemeral credentials; cancellation and failure clean up.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile, readFile, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { run, setTracingDisabled } from '@openai/agents';
import { SandboxAgent, Manifest, file, dir, localFile, localDir, shell, filesystem, SandboxUnsupportedFeatureError } from '@openai/agents/sandbox';
import { ScriptedModel, functionCall, assistantMessage, modelResponder } from '@openai/agents-core/testing';
import { RunboxSandboxClient } from '../src/index.js';
import { Serve, marker, pidsWith, waitFor, INPUT_POLICY } from './helpers.js';

// No model key and no trace export: the runs are scripted and local.
setTracingDisabled(true);

let serve: Serve;
before(async () => {
  serve = await Serve.start();
});
after(async () => {
  await serve?.stop();
});

const text = (b: Uint8Array) => new TextDecoder().decode(b);

function exitOf(formatted: string): number | null {
  const m = /Process exited with code (-?\d+)/.exec(formatted);
  return m ? Number(m[1]) : null;
}
function outputOf(formatted: string): string {
  const i = formatted.indexOf('Output:\n');
  return i < 0 ? '' : formatted.slice(i + 'Output:\n'.length);
}

test('a permitted path is readable; a forbidden host path is not, by any door', async () => {
  const mark = marker();
  const hostSecret = join(serve.dir, 'host-secret.txt');
  await writeFile(hostSecret, `host-${mark}\n`);
  await chmod(hostSecret, 0o644);
  // Control: the host file is there and readable by this (the daemon's) user.
  assert.equal(await readFile(hostSecret, 'utf8'), `host-${mark}\n`);

  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'evals' });
  const session = await client.create({ manifest: new Manifest({ entries: { 'data.txt': file({ content: `permitted-${mark}` }) } }) });
  try {
    // Permitted: the workspace file, by the file API and by a command.
    assert.equal(text(await session.readFile({ path: 'data.txt' })), `permitted-${mark}`);
    const cat = await session.execCommand({ cmd: 'cat /workspace/data.txt' });
    assert.equal(exitOf(cat), 0);
    assert.equal(outputOf(cat), `permitted-${mark}`);

    // Forbidden: the host path, by a command inside the sandbox (not in its mount namespace)...
    const hostCat = await session.execCommand({ cmd: `cat ${hostSecret}` });
    assert.notEqual(exitOf(hostCat), 0);
    assert.ok(!hostCat.includes(`host-${mark}`));
    // ...by the file API (a path outside /workspace is refused before any call)...
    await assert.rejects(session.readFile({ path: hostSecret }), /outside|escapes/);
    // ...through a link planted inside the sandbox (resolved inside its own root)...
    await session.execCommand({ cmd: `ln -s ${hostSecret} /workspace/planted; ln -s / /workspace/rootlink` });
    for (const p of ['planted', `rootlink${hostSecret}`]) {
      const got = await session.readFile({ path: p }).then(text, (e: Error) => `error: ${e.message}`);
      assert.ok(!got.includes(`host-${mark}`), `${p} does not reach the host file (${got.slice(0, 80)})`);
    }
    // ...and as a manifest entry: host files and directories are the SDK's unsupported feature.
    const before = await serve.sessionIds();
    for (const entry of [localFile({ src: hostSecret }), localDir({ src: serve.dir })]) {
      await assert.rejects(
        client.create({ manifest: new Manifest({ entries: { 'stolen': entry } }) }),
        (e: unknown) => e instanceof SandboxUnsupportedFeatureError && /host paths/.test((e as Error).message),
      );
      await assert.rejects(session.applyManifest(new Manifest({ entries: { 'stolen': entry } })), SandboxUnsupportedFeatureError);
    }
    assert.deepEqual((await serve.sessionIds()).sort(), before.sort(), 'a refused manifest leaves no session');
    assert.equal(await session.pathExists('stolen'), false);
  } finally {
    await session.close();
    client.close();
  }
});

test("a host path under /workspace/in is the policy's read-only input; one the policy does not allow is the SDK's unsupported feature", async () => {
  const mark = marker();
  await writeFile(join(serve.allowedDir, 'data.txt'), `allowed-${mark}`);
  const outside = join(serve.dir, `outside-${mark}.txt`);
  await writeFile(outside, `outside-${mark}`);
  await chmod(serve.allowedDir, 0o755);
  await chmod(join(serve.allowedDir, 'data.txt'), 0o644);
  await chmod(outside, 0o644);
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', policy: INPUT_POLICY, tenant: 'evals' });
  const before = await serve.sessionIds();
  // Forbidden by the policy: refused by the daemon (403), the SDK's unsupported feature, no session made.
  await assert.rejects(
    client.create({ manifest: new Manifest({ entries: { 'in/x.txt': localFile({ src: outside }), 'a.txt': file({ content: 'a' }) } }) }),
    (e: unknown) => e instanceof SandboxUnsupportedFeatureError && /allows no input there/.test((e as Error).message),
  );
  assert.deepEqual((await serve.sessionIds()).sort(), before.sort(), 'a refused input leaves no session');
  // Control: the allowed folder is mounted, readable and read-only.
  const session = await client.create({
    manifest: new Manifest({ entries: { 'in/data': localDir({ src: serve.allowedDir }), 'w.txt': file({ content: `w-${mark}` }) } }),
  });
  try {
    assert.equal(text(await session.readFile({ path: 'in/data/data.txt' })), `allowed-${mark}`);
    assert.equal(text(await session.readFile({ path: 'w.txt' })), `w-${mark}`);
    const w = await session.execCommand({ cmd: 'echo x > /workspace/in/data/data.txt 2>&1; echo rc=$?' });
    assert.match(outputOf(w), /Read-only file system[\s\S]*rc=[12]/);
    assert.equal(await readFile(join(serve.allowedDir, 'data.txt'), 'utf8'), `allowed-${mark}`);
    // A live session takes no new mounts.
    await assert.rejects(
      session.applyManifest(new Manifest({ entries: { 'in/more': localDir({ src: serve.allowedDir }) } })),
      (e: unknown) => e instanceof SandboxUnsupportedFeatureError && /not into a live one/.test((e as Error).message),
    );
  } finally {
    await session.close();
    client.close();
  }
});

test("the policy's read-only input mount cannot be changed; the workspace beside it can", async () => {
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'evals' });
  const session = await client.create({ manifest: new Manifest({ entries: { out: dir() } }) });
  try {
    assert.equal(await session.directoryExists('in'), true);
    // By a command: the mount is read-only (EROFS), for root inside too.
    const touch = await session.execCommand({ cmd: 'touch /workspace/in/x 2>&1; echo rc=$?' });
    assert.match(outputOf(touch), /Read-only file system[\s\S]*rc=1/);
    // By the editor and the file API: refused.
    const editor = session.createEditor();
    await assert.rejects(editor.createFile({ type: 'create_file', path: 'in/new.txt', diff: '+x\n' }));
    await assert.rejects(session.writeFile('in/new.txt', 'x'));
    // By a manifest: refused before anything is written.
    await assert.rejects(session.applyManifest(new Manifest({ entries: { 'in/m.txt': file({ content: 'x' }) } })), SandboxUnsupportedFeatureError);
    assert.equal(await session.pathExists('in/new.txt'), false);
    assert.equal(await session.pathExists('in/x'), false);
    // Control: the same calls on /workspace/out succeed.
    const ok = await session.execCommand({ cmd: 'touch /workspace/out/x; echo rc=$?' });
    assert.equal(outputOf(ok), 'rc=0\n');
    await editor.createFile({ type: 'create_file', path: 'out/new.txt', diff: '+x\n' });
    await session.writeFile('out/w.txt', 'w');
    assert.equal(await session.pathExists('out/new.txt'), true);
    assert.equal(text(await session.readFile({ path: 'out/w.txt' })), 'w');
  } finally {
    await session.close();
    client.close();
  }
});

test('a snapshot restores the artifacts without the ephemeral credentials', async () => {
  const mark = marker();
  const token = `cred-${mark}`;
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'evals' });
  const manifest = new Manifest({
    entries: {
      'keep.txt': file({ content: `keep-${mark}` }),
      'creds.txt': file({ content: token, ephemeral: true }),
    },
    environment: { TOKEN: { value: token, ephemeral: true }, PLAIN: 'plain' },
  });
  const session = await client.create({ manifest });
  let restored;
  try {
    const made = await session.execCommand({ cmd: 'mkdir -p out && echo "report $PLAIN" > out/report.txt && echo "[$TOKEN]"' });
    // Control: the live session has the credentials (env and file).
    assert.equal(outputOf(made), `[${token}]\n`);
    assert.equal(text(await session.readFile({ path: 'creds.txt' })), token);
    // The ledger has the ephemeral file by path only: no digest, never its bytes (control: the
    // persistent file's sha256 is there).
    const events = await serve.ledger(session.state.runId);
    const m = events.find((e) => e.type === 'manifest');
    assert.ok(m, `a manifest event: ${events.map((e) => e.type)}`);
    assert.deepEqual(m.data.files.find((f: any) => f.path === '/workspace/creds.txt'), { path: '/workspace/creds.txt', ephemeral: true });
    assert.match(m.data.files.find((f: any) => f.path === '/workspace/keep.txt').sha256, /^sha256:[0-9a-f]{64}$/);
    const credWrite = events.find((e) => e.type === 'file_write' && e.data.path === '/workspace/creds.txt');
    assert.ok(credWrite && credWrite.data.ephemeral === true && credWrite.data.sha256 === undefined, JSON.stringify(credWrite));
    assert.ok(!JSON.stringify(events).includes(token), 'the token is nowhere in the ledger');
    const bytes = await session.persistWorkspace();
    // The ephemeral file is back in the live session after the snapshot.
    assert.equal(text(await session.readFile({ path: 'creds.txt' })), token);

    // A fresh sandbox, hydrated from the bytes, with the manifest's persistent part only.
    restored = await client.create({ manifest: new Manifest({ environment: { PLAIN: 'plain' } }) });
    await restored.hydrateWorkspace(bytes);
    assert.equal(text(await restored.readFile({ path: 'out/report.txt' })), 'report plain\n');
    assert.equal(text(await restored.readFile({ path: 'keep.txt' })), `keep-${mark}`);
    assert.equal(await restored.pathExists('creds.txt'), false);
    const env = await restored.execCommand({ cmd: 'echo "[$TOKEN]"; grep -rl "cred-" /workspace; echo end' });
    assert.equal(outputOf(env), '[]\nend\n');
  } finally {
    await session.close();
    await restored?.close();
    client.close();
  }
});

// The SDK's shell tool passes no abort signal to execCommand, so an exec in flight ends its
// yield window (5 s here) before the runner sees the abort and closes the session.
test('cancellation cleans up: no session and no sandbox process is left', async () => {
  const mark = marker();
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'cancel' });
  const model = new ScriptedModel([
    [functionCall('exec_command', { cmd: `sh -c 'sleep 300; : ${mark}'`, yield_time_ms: 5000 }, { callId: 'long' })],
    [assistantMessage('never')],
  ]);
  const agent = new SandboxAgent({ name: 'cancel', instructions: 'x', model, capabilities: [shell()] });
  const controller = new AbortController();
  const before = await serve.sessionIds();
  const running = run(agent, 'go', { sandbox: { client }, signal: controller.signal });
  // Control: while it runs, its session is listed and its command is a process on the host.
  assert.ok(await waitFor(async () => (await pidsWith(mark)).length > 0, 15_000), 'the command runs');
  const during = await serve.sessionIds();
  assert.equal(during.length, before.length + 1);
  controller.abort();
  await assert.rejects(running);
  assert.ok(await waitFor(async () => (await serve.sessionIds()).length === before.length, 15_000), 'the session is gone');
  assert.ok(await waitFor(async () => (await pidsWith(mark)).length === 0, 15_000), 'no sandbox process is left');
  client.close();
});

test('failure cleans up: a model error leaves no session and no sandbox process', async () => {
  const mark = marker();
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'failure' });
  let seenDuring: { sessions: number; pids: number } | undefined;
  const before = await serve.sessionIds();
  const model = new ScriptedModel([
    [functionCall('exec_command', { cmd: `sh -c 'sleep 300; : ${mark}' >/dev/null 2>&1 & echo started`, yield_time_ms: 2000 }, { callId: 'bg' })],
    modelResponder(async () => {
      seenDuring = { sessions: (await serve.sessionIds()).length, pids: (await pidsWith(mark)).length };
      throw new Error(`scripted failure ${mark}`);
    }),
  ]);
  const agent = new SandboxAgent({ name: 'failure', instructions: 'x', model, capabilities: [shell(), filesystem()] });
  await assert.rejects(run(agent, 'go', { sandbox: { client } }), new RegExp(`scripted failure ${mark}`));
  // Control: at the failing call the session and its background process were there.
  assert.deepEqual(seenDuring && { sessions: seenDuring.sessions - before.length, hasPid: seenDuring.pids > 0 }, { sessions: 1, hasPid: true });
  assert.ok(await waitFor(async () => (await serve.sessionIds()).length === before.length, 15_000), 'the session is gone');
  assert.ok(await waitFor(async () => (await pidsWith(mark)).length === 0, 15_000), 'no sandbox process is left');
  client.close();
});
