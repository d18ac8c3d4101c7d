// A real `runbox serve --e2b-listen` for the E2B SDK tests and the benchmark: a temporary state
// directory and socket, two API keys (tenants acme and other), the port the daemon picked.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const RUNBOX = process.env.RUNBOX_BIN || path.join(ROOT, 'runbox');

// RBX_E2B_UID: the daemon and every runbox command run as that uid (rootless), with their own
// HOME and XDG_RUNTIME_DIR, as tests/lib.sh's user mode runs runbox.
const AS = process.env.RBX_E2B_UID ? Number(process.env.RBX_E2B_UID) : null;
let ENV_DIR = null;

// The command line of `runbox ARGS` as the test's user.
export function command(args) {
  if (AS === null) return [RUNBOX, args];
  return ['setpriv', [`--reuid=${AS}`, `--regid=${AS}`, '--clear-groups', '--inh-caps=-all', 'env', '-i',
    'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', `HOME=${ENV_DIR}/home`,
    `XDG_RUNTIME_DIR=${ENV_DIR}/xdg`, RUNBOX, ...args]];
}

export function runbox(args, opts = {}) {
  const [cmd, argv] = command(args);
  return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

export async function startDaemon() {
  // Searchable by the sandbox's host ids (the run directory lives below it).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rbx-e2b-'));
  fs.chmodSync(dir, 0o755);
  if (AS !== null) {
    ENV_DIR = dir;
    for (const sub of ['home', 'xdg', 'state']) fs.mkdirSync(path.join(dir, sub), { mode: 0o700 });
    for (const sub of ['', 'home', 'xdg', 'state']) fs.chownSync(path.join(dir, sub), AS, AS);
  }
  const keys = path.join(dir, 'keys.json');
  const key = runbox(['serve', '--e2b-keys', keys, '--e2b-new-key', 'acme']).trim();
  const otherKey = runbox(['serve', '--e2b-keys', keys, '--e2b-new-key', 'other']).trim();
  const sock = path.join(dir, 'serve.sock');
  const state = path.join(dir, 'state');
  const [cmd, argv] = command(['serve', '--socket', sock, '--state-dir', state, '--e2b-listen', '127.0.0.1:0',
    '--e2b-keys', keys]);
  const child = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runbox serve did not listen within 30 s: ${log}`)), 30000);
    child.stderr.on('data', (d) => {
      log += d;
      const m = /e2b API on http:\/\/127\.0\.0\.1:(\d+)$/m.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`runbox serve exited ${code}: ${log}`));
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    dir, sock, state, key, otherKey, url, port, pid: child.pid, uid: AS,
    log: () => log,
    // SDK options: both URLs on the one port.
    opts: (extra = {}) => ({ apiKey: key, apiUrl: url, sandboxUrl: url, ...extra }),
    async stop() {
      if (child.exitCode === null) {
        const done = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await done;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
