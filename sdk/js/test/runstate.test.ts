// The SDK's own resume path: a run interrupted for an approval is serialized as a RunState
// (string), its owned runbox session closed; the approved run resumes from that string in a
// fresh sandbox started from the snapshot, with the files and a fresh environment.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { run, tool, RunState, setTracingDisabled } from '@openai/agents';
import { SandboxAgent, Manifest, file, shell } from '@openai/agents/sandbox';
import { ScriptedModel, functionCall, assistantMessage } from '@openai/agents-core/testing';
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

test('a RunState interrupted for approval resumes in a fresh runbox sandbox from its snapshot', async () => {
  const mark = marker();
  const secret = `eph-${mark}`;
  const client = new RunboxSandboxClient({ socketPath: serve.socketPath, image: 'minimal', tenant: 'rs', agent: 'rs' });
  const deploy = tool({ name: 'deploy', description: 'needs a human', parameters: z.object({}), needsApproval: true, execute: async () => 'deployed' });
  const model = new ScriptedModel([
    [functionCall('exec_command', { cmd: `echo "made ${mark}" > out.txt; echo "has=\${TOKEN:+yes}"` }, { callId: 'w' })],
    [functionCall('deploy', {}, { callId: 'd' })],
    [functionCall('exec_command', { cmd: 'cat out.txt; echo "has=${TOKEN:+yes} len=${#TOKEN}"' }, { callId: 'r' })],
    [assistantMessage('done')],
  ]);
  const manifest = () =>
    new Manifest({ entries: { 'in.txt': file({ content: 'x' }) }, environment: { TOKEN: { value: secret, ephemeral: true } } });
  const agent = new SandboxAgent({ name: 'rs', instructions: 'x', model, capabilities: [shell()], tools: [deploy], defaultManifest: manifest() });
  const sessionsBefore = await serve.sessionIds();

  const first = await run(agent, 'go', { sandbox: { client } });
  assert.equal(first.interruptions.length, 1, 'the run stops for the approval');
  const saved = first.state.toString();
  assert.ok(!saved.includes(secret), 'the RunState string holds no ephemeral value');
  assert.match(saved, /"snapshotRef":"sha256:[0-9a-f]{64}"/);
  assert.doesNotMatch(saved, /"sessionId":"[0-9a-f]{32}"/, 'no runbox session id travels in the RunState');
  const runIds = [...saved.matchAll(/"runId":"([0-9a-f]+)"/g)].map((m) => m[1]);
  assert.equal(new Set(runIds).size, 1);

  // The interrupted run's session is closed (no live session to reconnect to).
  for (const id of await serve.sessionIds()) {
    if (!sessionsBefore.includes(id)) await serve.cli('session', 'rm', '--socket', serve.socketPath, id);
  }
  assert.deepEqual((await serve.sessionIds()).sort(), sessionsBefore.sort());

  const state = await RunState.fromString(agent, saved);
  for (const item of state.getInterruptions()) state.approve(item);
  const second = await run(agent, state, { sandbox: { client } });
  assert.equal(second.finalOutput, 'done');
  const outs = second.newItems
    .filter((i: any) => i.type === 'tool_call_output_item')
    .map((i: any) => [i.rawItem.callId, String(i.output)] as const);
  const r = outs.find(([id]) => id === 'r')?.[1] ?? '';
  // The file made before the interruption is there; the token is the trusted manifest's again.
  assert.match(r, new RegExp(`Output:\\nmade ${mark}\\nhas=yes len=${secret.length}\\n$`));
  const w = first.newItems.find((i: any) => i.type === 'tool_call_output_item' && i.rawItem.callId === 'w') as any;
  assert.match(String(w.output), /has=yes/, 'control: the first run had the token');

  // Two runs in the ledger: the first with the write, the resumed one with the read, hydrated.
  const ev1 = await serve.ledger(runIds[0]);
  assert.ok(ev1.some((e) => e.type === 'step_start' && JSON.stringify(e.data).includes('> out.txt')));
  assert.ok(ev1.some((e) => e.type === 'snapshot'));
  assert.ok(!JSON.stringify(ev1).includes(secret));
  // The resumed run is a fresh sandbox: a run of its own, started by hydrating the snapshot.
  const resumedIds = [...second.state.toString().matchAll(/"runId":"([0-9a-f]+)"/g)].map((m) => m[1]);
  assert.ok(resumedIds.length > 0 && resumedIds.every((id) => id !== runIds[0]), `resumed run ${resumedIds[0]} is not ${runIds[0]}`);
  const ev2 = await serve.ledger(resumedIds[0]);
  assert.ok(ev2.some((e) => e.type === 'hydrate'), 'the resumed run hydrated the snapshot');
  assert.ok(ev2.some((e) => e.type === 'step_start' && JSON.stringify(e.data).includes('cat out.txt')));
  for (const id of await serve.sessionIds()) {
    if (!sessionsBefore.includes(id)) await serve.cli('session', 'rm', '--socket', serve.socketPath, id);
  }
  client.close();
});
