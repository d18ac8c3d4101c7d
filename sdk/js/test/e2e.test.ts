// The SDK end to end without a model key: a SandboxAgent driven by the SDK's ScriptedModel runs
// shell and file tools on a runbox session, persists, and resumes in a fresh sandbox from the
// snapshot with its files and without its ephemeral environment; the ledger holds every command.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { run, applyDiff, setTracingDisabled } from '@openai/agents';
import { SandboxAgent, Manifest, file, dir, shell, filesystem } from '@openai/agents/sandbox';
import { ScriptedModel, functionCall, assistantMessage } from '@openai/agents-core/testing';
import type { ApplyPatchOperation } from '@openai/agents-core';
import type { ApplyPatchCallItem } from '@openai/agents-core/types';
import { serializeManifestRecord } from '@openai/agents-core/sandbox/internal';
import { RunboxSandboxClient } from '../src/index.js';
import { Serve, marker } from './helpers.js';

// No model key and no trace export: the runs are scripted and local.
setTracingDisabled(true);

let serve: Serve;
before(async () => {
  serve = await Serve.start();
});
after(async () => {
  await serve?.stop();
});

/** The model's apply_patch call (the SDK's hosted editor tool, which ScriptedModel speaks). */
function patchCall(callId: string, operation: ApplyPatchOperation): ApplyPatchCallItem {
  return { type: 'apply_patch_call', callId, status: 'completed', operation };
}

/** The tool outputs of a run, by call id. */
function toolOutputs(result: { newItems: any[] }): Map<string, string> {
  const m = new Map<string, string>();
  for (const item of result.newItems) {
    if (item.type === 'tool_call_output_item') {
      const out = item.rawItem.type === 'apply_patch_call_output' ? (item.rawItem.output ?? item.rawItem.status) : item.output;
      m.set(item.rawItem.callId, typeof out === 'string' ? out : JSON.stringify(out));
    }
  }
  return m;
}

/** The text after the SDK formatter's "Output:" line, and its exit code line. */
function execOutput(formatted: string): { exit: number | null; output: string } {
  const m = /Process exited with code (-?\d+)/.exec(formatted);
  const i = formatted.indexOf('Output:\n');
  return { exit: m ? Number(m[1]) : null, output: i < 0 ? '' : formatted.slice(i + 'Output:\n'.length) };
}

test('a scripted SandboxAgent runs shell and file tools, persists, and resumes from its snapshot', async () => {
  const mark = marker();
  const secret = `tok-${mark}`;
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'acme', agent: 'e2e' });
  const manifest = new Manifest({
    entries: {
      'input.txt': file({ content: `gamma ${mark}\nalpha\nbeta\n` }),
      out: dir(),
    },
    environment: {
      API_TOKEN: { value: secret, ephemeral: true },
      MODE: 'ci',
    },
  });
  const session = await client.create({ manifest });
  const runId = session.state.runId;

  const createDiff = '+first\n+second\n';
  const editDiff = '@@\n first\n-second\n+edited\n';
  // What the edits make, by the SDK's own diff applier (the editor must agree with it).
  const todo = applyDiff(applyDiff('', createDiff, 'create'), editDiff);
  assert.match(todo, /^first\nedited/);
  const model = new ScriptedModel([
    [functionCall('exec_command', { cmd: 'cat input.txt' }, { callId: 'read' })],
    [functionCall('exec_command', { cmd: 'wc -l < input.txt; [ -n "$API_TOKEN" ] && echo token-present; echo mode=$MODE' }, { callId: 'cmd' })],
    [patchCall('create', { type: 'create_file', path: 'notes/todo.md', diff: createDiff })],
    [patchCall('edit', { type: 'update_file', path: 'notes/todo.md', diff: editDiff })],
    [functionCall('exec_command', { cmd: 'sort input.txt > /workspace/out/sorted.txt && cat notes/todo.md >> out/sorted.txt && cat out/sorted.txt' }, { callId: 'write' })],
    [functionCall('exec_command', { cmd: 'exit 7' }, { callId: 'fail' })],
    [patchCall('missing', { type: 'update_file', path: 'nope.md', diff: '@@\n-a\n+b\n' })],
    [assistantMessage('done')],
  ]);
  const agent = new SandboxAgent({ name: 'runbox-e2e', instructions: 'Use the sandbox.', model, capabilities: [shell(), filesystem()] });
  const result = await run(agent, 'work on input.txt', { sandbox: { session } });
  model.assertComplete();
  assert.equal(result.finalOutput, 'done');
  const outs = toolOutputs(result);

  // The agent's tool outputs, in the SDK's own format.
  assert.match(outs.get('read')!, /^Chunk ID: \w+\nWall time: [\d.]+ seconds\nProcess exited with code 0\nOutput:\n/);
  assert.deepEqual(execOutput(outs.get('read')!), { exit: 0, output: `gamma ${mark}\nalpha\nbeta\n` });
  assert.deepEqual(execOutput(outs.get('cmd')!), { exit: 0, output: '3\ntoken-present\nmode=ci\n' });
  assert.equal(outs.get('create'), 'completed');
  assert.equal(outs.get('edit'), 'completed');
  // Control: an edit of a file that does not exist fails through the editor.
  assert.match(outs.get('missing')!, /failed|not found/i);
  assert.deepEqual(execOutput(outs.get('write')!), { exit: 0, output: `alpha\nbeta\ngamma ${mark}\n${todo}` });
  // Control: a failing command's exit code is passed through, not hidden.
  assert.equal(execOutput(outs.get('fail')!).exit, 7);

  // Files as the client sees them after the run.
  assert.equal(new TextDecoder().decode(await session.readFile({ path: 'notes/todo.md' })), todo);
  const listed = await session.listDir({ path: '.' });
  assert.deepEqual(
    listed.filter((e) => ['input.txt', 'notes', 'out'].includes(e.name)).map((e) => [e.name, e.type]),
    [['input.txt', 'file'], ['notes', 'dir'], ['out', 'dir']],
  );

  // Persist: the bytes are a tar of /workspace holding the artifact and not the token.
  const bytes = await session.persistWorkspace();
  assert.ok(bytes.byteLength > 0);
  const serialized = JSON.parse(
    JSON.stringify({ ...(await client.serializeSessionState(session.state)), manifest: serializeManifestRecord(session.state.manifest) }),
  );
  assert.deepEqual(Object.keys(serialized).sort(), ['manifest', 'runId', 'snapshotRef']);
  assert.equal(serialized.runId, runId);
  assert.match(serialized.snapshotRef, /^sha256:[0-9a-f]{64}$/);
  assert.ok(!JSON.stringify(serialized).includes(secret), 'the serialized state holds no ephemeral value');
  await session.close();
  assert.ok(!(await serve.sessionIds()).includes(session.state.sessionId), 'the first session is closed');

  // Resume in a fresh sandbox: the files are back, the ephemeral token is not.
  const state2 = await client.deserializeSessionState(serialized);
  const resumed = await client.resume(state2);
  assert.notEqual(resumed.state.sessionId, session.state.sessionId);
  const model2 = new ScriptedModel([
    [functionCall('exec_command', { cmd: 'cat out/sorted.txt; echo "token=[$API_TOKEN] mode=$MODE"' }, { callId: 'after' })],
    [assistantMessage('resumed')],
  ]);
  const agent2 = new SandboxAgent({ name: 'runbox-e2e', instructions: 'Use the sandbox.', model: model2, capabilities: [shell(), filesystem()] });
  const result2 = await run(agent2, 'check', { sandbox: { session: resumed } });
  assert.deepEqual(execOutput(toolOutputs(result2).get('after')!), {
    exit: 0,
    output: `alpha\nbeta\ngamma ${mark}\n${todo}token=[] mode=ci\n`,
  });
  const resumedRun = resumed.state.runId;
  await resumed.close();
  client.close();

  // The ledger: each command the agent ran is a step of the session's run, with its exact text.
  const events = await serve.ledger(runId);
  const texts = events.filter((e) => e.type === 'step_start').map((e) => JSON.stringify(e.data));
  for (const cmd of ['cat input.txt', 'wc -l < input.txt', 'sort input.txt > /workspace/out/sorted.txt', 'exit 7']) {
    assert.ok(texts.some((t) => t.includes(JSON.stringify(cmd).slice(1, -1))), `the ledger of ${runId} holds "${cmd}"`);
  }
  assert.ok(events.some((e) => e.type === 'run_end'), 'the closed session has its run_end');
  // The editor's writes and the snapshot are events of the run too; the resumed run records
  // its hydrate from that snapshot.
  const writes = events.filter((e) => e.type === 'file_write').map((e) => e.data.path);
  assert.ok(writes.includes('/workspace/notes/todo.md') && writes.includes('/workspace/input.txt'), `file_write events: ${writes}`);
  assert.ok(events.some((e) => e.type === 'snapshot' && JSON.stringify(e.data).includes(serialized.snapshotRef.slice(7))), 'the snapshot is recorded');
  const events2 = await serve.ledger(resumedRun);
  assert.ok(events2.some((e) => e.type === 'hydrate'), 'the resumed run records its hydrate');
  // Control: the resumed session is a run of its own, and the first run holds nothing it ran.
  assert.notEqual(resumedRun, runId);
  assert.ok(!texts.some((t) => t.includes('token=[')), 'the first run has no command of the resumed one');
  const texts2 = events2.filter((e) => e.type === 'step_start').map((e) => JSON.stringify(e.data));
  assert.ok(texts2.some((t) => t.includes('token=[')));
  // Neither run's ledger holds the ephemeral value.
  assert.ok(!JSON.stringify(events).includes(secret));
});
