// A real `runbox serve` for the tests: started on a temp socket with a temp state directory
// (as tests/integration/serve.sh does), and the CLI views the tests assert on (ledger, ls).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, chmod, rm, readdir, readFile, stat } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { Buffer } from 'node:buffer';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The repository root (this file is sdk/js/dist/test/helpers.js once built). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
export const RUNBOX = process.env.RUNBOX ?? join(ROOT, 'runbox');

/** The policy whose inputs.allow is only Serve's allowedDir. */
export const INPUT_POLICY = 'sdk-inputs';

export function marker(): string {
  return `rbxsdk-${randomBytes(6).toString('hex')}`;
}

export async function waitFor(pred: () => Promise<boolean> | boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return pred();
}

export class Serve {
  readonly dir: string;
  readonly socketPath: string;
  readonly stateDir: string;
  private child?: ChildProcess;
  log = '';

  private constructor(dir: string) {
    this.dir = dir;
    this.socketPath = join(dir, 'xdg', 'serve.sock');
    this.stateDir = join(dir, 'state');
  }

  /** A host folder the operator's policy INPUT_POLICY allows as an input (nothing else is). */
  get allowedDir(): string {
    return join(this.dir, 'allowed');
  }

  private env(): NodeJS.ProcessEnv {
    return {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: join(this.dir, 'home'),
      RUNBOX_CONFIG_DIR: join(this.dir, 'cfg'),
      RUNBOX_STATE_DIR: this.stateDir,
      XDG_RUNTIME_DIR: join(this.dir, 'xdg'),
    };
  }

  /** Starts the daemon and waits for its socket. */
  static async start(): Promise<Serve> {
    if (!existsSync(RUNBOX)) throw new Error(`no runbox binary at ${RUNBOX} (make all)`);
    const dir = await mkdtemp('/tmp/rbx-sdk-');
    // The state directory's parents must be searchable by the sandbox's host ids.
    await chmod(dir, 0o755);
    const s = new Serve(dir);
    const { mkdir } = await import('node:fs/promises');
    await mkdir(s.stateDir, { recursive: true });
    await mkdir(join(dir, 'home'));
    await mkdir(join(dir, 'xdg'), { mode: 0o700 });
    // The operator's policy INPUT_POLICY: the shipped default, inputs only from allowedDir.
    await mkdir(join(dir, 'cfg', 'policies'), { recursive: true });
    await mkdir(s.allowedDir);
    const pol = JSON.parse(await readFile(join(ROOT, 'policy', 'profiles', 'default.json'), 'utf8'));
    pol.name = INPUT_POLICY;
    pol.inputs = { allow: [s.allowedDir] };
    const { writeFile: wf } = await import('node:fs/promises');
    await wf(join(dir, 'cfg', 'policies', `${INPUT_POLICY}.json`), JSON.stringify(pol));
    s.child = spawn(RUNBOX, ['serve', '--socket', s.socketPath], { env: s.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    s.child.stdout!.on('data', (d) => (s.log += d));
    s.child.stderr!.on('data', (d) => (s.log += d));
    const up = await waitFor(() => existsSync(s.socketPath), 15_000);
    if (!up) {
      await s.stop();
      throw new Error(`runbox serve did not listen on ${s.socketPath}: ${s.log}`);
    }
    return s;
  }

  /** SIGTERM (the daemon drains: every session closed and recorded), then the temp dir goes. */
  async stop(): Promise<void> {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) {
      const done = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      const t = setTimeout(() => c.kill('SIGKILL'), 20_000);
      await done;
      clearTimeout(t);
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  async cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const r = await run(RUNBOX, args, { env: { ...this.env(), RUNBOX_SOCKET: this.socketPath }, maxBuffer: 64 << 20 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (e: any) {
      return { code: e.code ?? 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  }

  /** The run's ledger events (`runbox ledger show RUN --json`). */
  async ledger(runId: string): Promise<{ type: string; data: any }[]> {
    const r = await this.cli('ledger', 'show', runId, '--json');
    if (r.code !== 0) throw new Error(`runbox ledger show ${runId}: ${r.stderr}`);
    const j = JSON.parse(r.stdout);
    return Array.isArray(j) ? j : j.events;
  }

  /** Session ids `runbox session ls` lists. */
  async sessionIds(): Promise<string[]> {
    const r = await this.cli('session', 'ls', '--socket', this.socketPath);
    if (r.code !== 0) throw new Error(`runbox session ls: ${r.stderr}`);
    return [...r.stdout.matchAll(/^([0-9a-f]{32})\b/gm)].map((m) => m[1]);
  }
}

/** Host pids whose command line holds `text` (a marker a sandbox process was started with). */
export async function pidsWith(text: string): Promise<number[]> {
  const out: number[] = [];
  for (const d of await readdir('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const cmd = await readFile(`/proc/${d}/cmdline`, 'utf8');
      if (cmd.includes(text)) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

export async function isFile(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

/** A ustar archive of the given members (type '0' file, '2' symlink, '5' directory). */
export function tarOf(members: { name: string; type?: '0' | '2' | '5'; content?: string; link?: string }[]): Uint8Array {
  const blocks: Buffer[] = [];
  for (const m of members) {
    const body = Buffer.from(m.content ?? '');
    const h = Buffer.alloc(512);
    h.write(m.name, 0, 100);
    h.write(m.type === '5' ? '0000755\0' : '0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(body.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(m.type ?? '0', 156);
    if (m.link) h.write(m.link, 157, 100);
    h.write('ustar\u000000', 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return new Uint8Array(Buffer.concat(blocks));
}
