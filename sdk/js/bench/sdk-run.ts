// The same scripted SandboxAgent run (shell and file tools, in a sandbox the runner creates and
// closes) on runbox and on the SDK's UnixLocalSandboxClient; wall time per run and the ratio.
// Docker's client is named but measured only where a Docker engine answers.
import { execFileSync } from 'node:child_process';
import { run, setTracingDisabled } from '@openai/agents';
import { SandboxAgent, Manifest, file, dir, shell, filesystem } from '@openai/agents/sandbox';
import type { SandboxClient } from '@openai/agents/sandbox';
import { UnixLocalSandboxClient } from '@openai/agents/sandbox/local';
import { ScriptedModel, functionCall, assistantMessage } from '@openai/agents-core/testing';
import { RunboxSandboxClient } from '../src/index.js';
import { Serve } from '../test/helpers.js';

// No model key and no trace export: the runs are scripted and local.
setTracingDisabled(true);

const RUNS = Number(process.env.SDK_BENCH_RUNS ?? 10);

function script(): ScriptedModel {
  return new ScriptedModel([
    [functionCall('exec_command', { cmd: 'cat input.txt' }, { callId: 'c1' })],
    [{ type: 'apply_patch_call', callId: 'c2', status: 'completed', operation: { type: 'create_file', path: 'notes.md', diff: '+one\n+two\n' } }],
    [{ type: 'apply_patch_call', callId: 'c3', status: 'completed', operation: { type: 'update_file', path: 'notes.md', diff: '@@\n one\n-two\n+three\n' } }],
    [functionCall('exec_command', { cmd: 'sort input.txt > out/sorted.txt && wc -l out/sorted.txt' }, { callId: 'c4' })],
    [assistantMessage('done')],
  ]);
}

const manifest = () => new Manifest({ entries: { 'input.txt': file({ content: 'b\na\nc\n' }), out: dir() } });

async function once(client: SandboxClient<any, any>): Promise<number> {
  const agent = new SandboxAgent({ name: 'bench', instructions: 'x', model: script(), capabilities: [shell(), filesystem()] });
  const t0 = process.hrtime.bigint();
  const r = await run(agent, 'go', { sandbox: { client, manifest: manifest() } });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.finalOutput !== 'done') throw new Error(`the scripted run did not finish: ${String(r.finalOutput)}`);
  return ms;
}

async function measure(name: string, client: SandboxClient<any, any>): Promise<number> {
  await once(client); // warm: module loading, first sandbox
  const t: number[] = [];
  for (let i = 0; i < RUNS; i++) t.push(await once(client));
  t.sort((a, b) => a - b);
  const med = t[Math.floor(t.length / 2)];
  console.log(`${name.padEnd(28)} ${med.toFixed(1).padStart(9)} ms   (min ${t[0].toFixed(1)}, max ${t[t.length - 1].toFixed(1)}, ${RUNS} runs)`);
  return med;
}

function dockerAnswers(): boolean {
  try {
    execFileSync('docker', ['info'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const own = process.env.RUNBOX_SOCKET ? undefined : await Serve.start();
  const socketPath = process.env.RUNBOX_SOCKET ?? own!.socketPath;
  try {
    console.log('# SDK run: 4 tool calls (2 exec_command, 2 apply_patch) in a sandbox made and closed per run; median wall time');
    const runbox = new RunboxSandboxClient({ socketPath, image: process.env.SDK_BENCH_IMAGE ?? 'minimal' });
    const rb = await measure('runbox (RunboxSandboxClient)', runbox);
    runbox.close();
    const ul = await measure('UnixLocalSandboxClient', new UnixLocalSandboxClient());
    console.log(`ratio runbox / UnixLocal: ${(rb / ul).toFixed(2)}x (target: within 1.5x)`);
    if (dockerAnswers()) {
      console.log('DockerSandboxClient: a Docker engine answers, but no image imported from a local rootfs is set up by this script: not measured');
    } else {
      console.log('DockerSandboxClient: not measured: no Docker engine runs on this machine (`docker info` fails), so no figure and no ratio');
    }
  } finally {
    await own?.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
