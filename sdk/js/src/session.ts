// A SandboxSession over one `runbox serve` session: commands are serve processes (long-polled
// for the SDK's yield time), files are serve file calls, snapshots are serve snapshots.
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import {
  Manifest,
  SandboxUnsupportedFeatureError,
  SandboxConfigurationError,
  SandboxWorkspaceReadNotFoundError,
  SandboxSnapshotPersistError,
  SandboxArchiveError,
  WorkspacePathPolicy,
  resolveSandboxArchiveLimits,
} from '@openai/agents-core/sandbox';
import type {
  ExecCommandArgs,
  ExposedPortEndpoint,
  ListDirectoryArgs,
  ReadFileArgs,
  SandboxArchiveLimits,
  SandboxDirectoryEntry,
  SandboxExecResult,
  SandboxSession,
  ViewImageArgs,
  WorkspaceArchiveData,
  WorkspaceArchiveOptions,
  WriteStdinArgs,
} from '@openai/agents-core/sandbox';
import {
  elapsedSeconds,
  formatExecResponse,
  truncateOutput,
  imageOutputFromBytes,
  MAX_VIEW_IMAGE_BYTES,
  toUint8Array,
  mergeManifestDelta,
} from '@openai/agents-core/sandbox/internal';
import type { Editor } from '@openai/agents-core';
import type { ToolOutputImage } from '@openai/agents-core';
import { RunboxServeError, RunboxTransport } from './transport.js';
import { isSnapshotRef, type RunboxSandboxSessionState } from './state.js';
import { RunboxEditor } from './editor.js';

const DEFAULT_EXEC_YIELD_TIME_MS = 10_000;
const DEFAULT_WRITE_STDIN_YIELD_TIME_MS = 250;
/** serve's longest long-poll (RB_SERVE_MAX_WAIT_MS). */
const MAX_WAIT_MS = 60_000;
/** How long a helper process (moving ephemeral entries aside) may take. */
const HELPER_TIMEOUT_MS = 120_000;
const WORKSPACE = '/workspace';
/** The policy's read-only input mount. */
const INPUT_MOUNT = 'in';

export type ProcessResult = {
  status: string;
  exit: number;
  exit_code?: number;
  signal?: number;
  timed_out?: boolean;
  error?: string;
  [k: string]: unknown;
};

type Chunk = { seq: number; stream: 'stdout' | 'stderr'; data: string; encoding?: 'base64' };
type OutputReply = { chunks: Chunk[]; next_seq: number; exited: boolean; result?: ProcessResult };

export type Collected = {
  output: Buffer;
  stdout: Buffer;
  stderr: Buffer;
  nextSeq: number;
  exited: boolean;
  result?: ProcessResult;
};

type LiveProcess = { id: string; seq: number; stdin: boolean };

export type StatEntry = {
  path: string;
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mode?: string;
};

function decode(c: Chunk): Buffer {
  return c.encoding === 'base64' ? Buffer.from(c.data, 'base64') : Buffer.from(c.data, 'utf8');
}

function notFound(e: unknown): boolean {
  return e instanceof RunboxServeError && e.status === 404 && !e.routeMissing;
}

export class RunboxSandboxSession implements SandboxSession<RunboxSandboxSessionState> {
  readonly state: RunboxSandboxSessionState;
  private readonly transport: RunboxTransport;
  private archiveLimits?: SandboxArchiveLimits | null;
  private readonly processes = new Map<number, LiveProcess>();
  private nextProcessNumber = 1;
  private closing?: Promise<void>;
  private readonly exposed = new Map<number, ExposedPortEndpoint>();

  constructor(args: { transport: RunboxTransport; state: RunboxSandboxSessionState; archiveLimits?: SandboxArchiveLimits | null }) {
    this.transport = args.transport;
    this.state = args.state;
    this.archiveLimits = args.archiveLimits;
  }

  private get base(): string {
    return `/v1/sessions/${this.state.sessionId}`;
  }

  setArchiveLimits(limits?: SandboxArchiveLimits | null): void {
    this.archiveLimits = limits;
  }

  supportsPty(): boolean {
    return false;
  }

  createEditor(runAs?: string): Editor {
    assertNoRunAs(runAs);
    return new RunboxEditor(this);
  }

  async running(): Promise<boolean> {
    try {
      await this.transport.json('GET', this.base);
      return true;
    } catch (e) {
      if (notFound(e)) return false;
      throw e;
    }
  }

  // --- paths ---------------------------------------------------------------------------

  /** The absolute sandbox path of a workspace-relative or absolute path; never outside /workspace. */
  resolvePath(path: string | undefined, forWrite = false): string {
    const policy = new WorkspacePathPolicy({ root: this.state.manifest.root });
    const resolved = policy.resolve(path, { forWrite });
    const p = resolved.path;
    if (p !== WORKSPACE && !p.startsWith(`${WORKSPACE}/`)) {
      throw new SandboxUnsupportedFeatureError(`runbox serve: path "${path}" is outside /workspace (extra path grants are not supported)`, {
        provider: 'runbox',
        path,
      });
    }
    return p;
  }

  // --- processes -----------------------------------------------------------------------

  private async startProcess(body: Record<string, unknown>): Promise<string> {
    const r = await this.transport.json<{ id: string }>('POST', `${this.base}/processes`, { json: body });
    return r.id;
  }

  /** Output after `afterSeq` until the process ended or `waitMs` passed (long-polls serve). */
  async collect(pid: string, afterSeq: number, waitMs: number): Promise<Collected> {
    const deadline = Date.now() + waitMs;
    const out: Buffer[] = [];
    const so: Buffer[] = [];
    const se: Buffer[] = [];
    let seq = afterSeq;
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const wait = Math.min(left, MAX_WAIT_MS);
      const r = await this.transport.json<OutputReply>('GET', `${this.base}/processes/${pid}/output`, {
        query: { after_seq: seq, wait_ms: wait },
        timeoutMs: wait + 30_000,
      });
      for (const c of r.chunks) {
        const b = decode(c);
        out.push(b);
        (c.stream === 'stderr' ? se : so).push(b);
      }
      seq = r.next_seq ?? seq;
      if (r.exited) {
        return { output: Buffer.concat(out), stdout: Buffer.concat(so), stderr: Buffer.concat(se), nextSeq: seq, exited: true, result: r.result };
      }
      if (Date.now() >= deadline) {
        return { output: Buffer.concat(out), stdout: Buffer.concat(so), stderr: Buffer.concat(se), nextSeq: seq, exited: false };
      }
    }
  }

  /** Runs argv to its end (a helper of this client, recorded in the ledger as any process). */
  async runToEnd(argv: string[], opts: { cwd?: string } = {}): Promise<Collected & { exit: number }> {
    const pid = await this.startProcess({ argv, cwd: opts.cwd ?? WORKSPACE });
    const c = await this.collect(pid, 0, HELPER_TIMEOUT_MS);
    if (!c.exited || !c.result) {
      await this.signal(pid, 'KILL').catch(() => undefined);
      throw new SandboxConfigurationError(`runbox: helper ${JSON.stringify(argv[0])} did not end in ${HELPER_TIMEOUT_MS} ms`);
    }
    return { ...c, exit: c.result.exit };
  }

  private async signal(pid: string, sig: string): Promise<void> {
    await this.transport.json('POST', `${this.base}/processes/${pid}/signal`, { json: { signal: sig } });
  }

  async exec(args: ExecCommandArgs): Promise<SandboxExecResult> {
    assertNoRunAs(args.runAs);
    const start = Date.now();
    const cwd = this.resolvePath(args.workdir);
    // A process gets a stdin pipe only when the caller means to talk to it (tty); otherwise
    // /dev/null, so a command that reads stdin ends instead of waiting for input never sent.
    const interactive = args.tty === true;
    const body: Record<string, unknown> = args.shell
      ? { argv: [args.shell, args.login === false ? '-c' : '-lc', args.cmd] }
      : { script: args.cmd };
    body.cwd = cwd;
    if (Object.keys(this.state.environment).length > 0) body.env = this.state.environment;
    if (interactive) body.stdin = true;
    const pid = await this.startProcess(body);
    const c = await this.collect(pid, 0, args.yieldTimeMs ?? DEFAULT_EXEC_YIELD_TIME_MS);
    const out = truncateOutput(c.output.toString('utf8'), args.maxOutputTokens);
    const common = {
      output: out.text,
      stdout: c.stdout.toString('utf8'),
      stderr: c.stderr.toString('utf8'),
      wallTimeSeconds: elapsedSeconds(start),
      originalTokenCount: out.originalTokenCount,
    };
    if (c.exited) return { ...common, exitCode: c.result?.exit ?? 1 };
    const sessionId = this.nextProcessNumber++;
    this.processes.set(sessionId, { id: pid, seq: c.nextSeq, stdin: interactive });
    return { ...common, sessionId };
  }

  async execCommand(args: ExecCommandArgs): Promise<string> {
    return formatExecResponse(await this.exec(args));
  }

  async writeStdin(args: WriteStdinArgs): Promise<string> {
    const p = this.processes.get(args.sessionId);
    if (!p) {
      return formatExecResponse({ output: `write_stdin failed: session not found: ${args.sessionId}`, wallTimeSeconds: 0, exitCode: 1 });
    }
    const start = Date.now();
    const chars = args.chars ?? '';
    if (chars.includes('\u0003')) await this.signal(p.id, 'INT').catch(() => undefined);
    let text = chars.split('\u0003').join('');
    const eof = text.endsWith('\u0004');
    if (eof) text = text.slice(0, -1);
    if ((text.length > 0 || eof) && p.stdin) {
      await this.transport.json('POST', `${this.base}/processes/${p.id}/stdin`, {
        body: text,
        query: eof ? { close: 1 } : undefined,
      });
    } else if (text.length > 0) {
      return formatExecResponse({ output: 'write_stdin failed: the process was started without a stdin (tty: false)', wallTimeSeconds: 0, sessionId: args.sessionId });
    }
    const c = await this.collect(p.id, p.seq, args.yieldTimeMs ?? DEFAULT_WRITE_STDIN_YIELD_TIME_MS);
    p.seq = c.nextSeq;
    const out = truncateOutput(c.output.toString('utf8'), args.maxOutputTokens);
    if (c.exited) {
      this.processes.delete(args.sessionId);
      return formatExecResponse({ output: out.text, wallTimeSeconds: elapsedSeconds(start), exitCode: c.result?.exit ?? 1, originalTokenCount: out.originalTokenCount });
    }
    return formatExecResponse({ output: out.text, wallTimeSeconds: elapsedSeconds(start), sessionId: args.sessionId, originalTokenCount: out.originalTokenCount });
  }

  // --- files ---------------------------------------------------------------------------

  async readFile(args: ReadFileArgs): Promise<Uint8Array> {
    assertNoRunAs(args.runAs);
    const path = this.resolvePath(args.path);
    try {
      // maxBytes is the SDK's prefix read (not serve's max_bytes, which refuses a larger file):
      // the body is read that far and the connection dropped.
      return await this.transport.raw('GET', `${this.base}/files`, { query: { path }, limitBytes: args.maxBytes });
    } catch (e) {
      if (notFound(e)) throw new SandboxWorkspaceReadNotFoundError(`File not found: ${args.path}`, { path });
      throw e;
    }
  }

  /** Writes a whole file (streamed to disk by the daemon), making its parent directories. */
  async writeFile(pathIn: string, content: string | Uint8Array, mode?: number): Promise<void> {
    const path = this.resolvePath(pathIn, true);
    const q = { path, parents: 1, mode: mode === undefined ? undefined : mode.toString(8).padStart(4, '0') };
    await this.transport.json('PUT', `${this.base}/files`, { query: q, body: content });
  }

  async mkdir(pathIn: string, parents = true): Promise<void> {
    const path = this.resolvePath(pathIn, true);
    try {
      await this.transport.json('POST', `${this.base}/fs/mkdir`, { json: { path, parents } });
    } catch (e) {
      // An existing directory is what mkdir -p asks for.
      if (parents && e instanceof RunboxServeError && e.status === 409 && (await this.directoryExists(path))) return;
      throw e;
    }
  }

  async remove(pathIn: string, recursive = false): Promise<void> {
    const path = this.resolvePath(pathIn, true);
    await this.transport.json('POST', `${this.base}/fs/remove`, { json: { path, recursive } });
  }

  async rename(fromIn: string, toIn: string): Promise<void> {
    const from = this.resolvePath(fromIn, true);
    const to = this.resolvePath(toIn, true);
    await this.transport.json('POST', `${this.base}/fs/rename`, { json: { from, to, overwrite: true } });
  }

  /** stat of a path, or null when it does not exist. */
  async stat(pathIn: string): Promise<StatEntry | null> {
    const path = this.resolvePath(pathIn);
    try {
      return await this.transport.json<StatEntry>('GET', `${this.base}/fs/stat`, { query: { path } });
    } catch (e) {
      if (notFound(e)) return null;
      throw e;
    }
  }

  async pathExists(path: string, runAs?: string): Promise<boolean> {
    assertNoRunAs(runAs);
    return (await this.stat(path)) !== null;
  }

  async directoryExists(path: string, runAs?: string): Promise<boolean> {
    assertNoRunAs(runAs);
    return (await this.stat(path))?.type === 'dir';
  }

  async listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]> {
    assertNoRunAs(args.runAs);
    const path = this.resolvePath(args.path);
    const rel = path === WORKSPACE ? '' : path.slice(WORKSPACE.length + 1);
    let entries: StatEntry[];
    try {
      entries = (await this.transport.json<{ entries: StatEntry[] }>('GET', `${this.base}/fs/list`, { query: { path, depth: 1 } })).entries;
    } catch (e) {
      if (notFound(e)) throw new SandboxWorkspaceReadNotFoundError(`Directory not found: ${args.path}`, { path });
      throw e;
    }
    return entries
      .map((e) => ({
        name: e.name,
        path: rel ? `${rel}/${e.name}` : e.name,
        type: (e.type === 'file' || e.type === 'dir' ? e.type : 'other') as SandboxDirectoryEntry['type'],
      }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async viewImage(args: ViewImageArgs): Promise<ToolOutputImage> {
    const bytes = await this.readFile({ path: args.path, runAs: args.runAs, maxBytes: MAX_VIEW_IMAGE_BYTES + 1 });
    if (bytes.byteLength > MAX_VIEW_IMAGE_BYTES) {
      throw new SandboxConfigurationError(`Image file exceeds the 10 MB limit: ${args.path}`);
    }
    return imageOutputFromBytes(args.path, bytes);
  }

  // --- the manifest --------------------------------------------------------------------

  async applyManifest(manifest: Manifest, runAs?: string): Promise<void> {
    assertNoRunAs(runAs);
    assertManifestSupported(manifest);
    for (const { absolutePath, entry } of manifest.iterEntries()) {
      if (entry.type === 'dir') await this.mkdir(absolutePath, true);
      else if (entry.type === 'file') await this.writeFile(absolutePath, entry.content, fileMode(entry.permissions));
    }
    const env = await manifest.resolveEnvironment();
    this.state.environment = { ...this.state.environment, ...env };
    this.state.manifest = mergeManifestDelta(this.state.manifest, manifest);
  }

  // --- snapshots -----------------------------------------------------------------------

  /**
   * A snapshot of /workspace in runbox's store (its ref kept in the state, so a resume starts
   * from it), returned as bytes. Ephemeral manifest entries are taken out around it.
   */
  async persistWorkspace(): Promise<Uint8Array> {
    const ref = await this.snapshot();
    try {
      return await this.transport.raw('GET', `/v1/snapshots/${ref}`);
    } catch (e) {
      throw new SandboxSnapshotPersistError(`runbox: snapshot ${ref}: ${(e as Error).message}`, { cause: String(e) });
    }
  }

  /** A snapshot in runbox's store, without ephemeral entries; its ref is kept in the state. */
  async snapshot(): Promise<string> {
    const ephemeral = [...this.state.manifest.ephemeralPersistencePaths()].map((p) => `${this.state.manifest.root}/${p}`);
    const aside = await this.withoutEphemeral(ephemeral);
    try {
      const r = await this.transport.json<{ ref: string }>('POST', `${this.base}/snapshots`, { json: {} });
      if (!isSnapshotRef(r.ref)) throw new Error(`the daemon answered no snapshot ref: ${JSON.stringify(r).slice(0, 200)}`);
      this.state.snapshotRef = r.ref;
      return r.ref;
    } catch (e) {
      throw new SandboxSnapshotPersistError(`runbox: snapshot of session ${this.state.sessionId}: ${(e as Error).message}`, { cause: String(e) });
    } finally {
      await aside.restore();
    }
  }

  /** Moves ephemeral paths aside (a daemon snapshot takes all of /workspace) and back after. */
  private async withoutEphemeral(paths: string[]): Promise<{ restore(): Promise<void> }> {
    const moved: [string, string][] = [];
    for (const p of paths) {
      if (!(await this.pathExists(p))) continue;
      const aside = `/tmp/.runbox-ephemeral-${randomBytes(8).toString('hex')}`;
      const r = await this.runToEnd(['mv', '--', p, aside]);
      if (r.exit !== 0) throw new SandboxSnapshotPersistError(`runbox: cannot set aside ephemeral ${p}: ${r.stderr.toString('utf8').trim()}`);
      moved.push([p, aside]);
    }
    return {
      restore: async () => {
        for (const [p, aside] of moved) await this.runToEnd(['mv', '--', aside, p]);
      },
    };
  }

  /**
   * Unpacks a tar (plain, gzip or zstd) into /workspace. The daemon checks every member before
   * writing (bounds, no path or link leaving /workspace); the SDK's maxInputBytes is checked here.
   */
  async hydrateWorkspace(data: WorkspaceArchiveData, options: WorkspaceArchiveOptions = {}): Promise<void> {
    const bytes = await toUint8Array(data);
    const limits = resolveSandboxArchiveLimits(options.archiveLimits === undefined ? this.archiveLimits : options.archiveLimits);
    if (limits?.maxInputBytes != null && bytes.byteLength > limits.maxInputBytes) {
      throw new SandboxArchiveError(`workspace archive: ${bytes.byteLength} bytes is over the limit of ${limits.maxInputBytes}`);
    }
    try {
      await this.transport.json('POST', `${this.base}/hydrate`, { body: bytes });
    } catch (e) {
      if (e instanceof RunboxServeError && e.status >= 400 && e.status < 500 && !notFound(e)) {
        throw new SandboxArchiveError(`runbox: hydrate: ${e.serveMessage}`);
      }
      throw e;
    }
  }

  /** Exposes the sandbox's 127.0.0.1:port (3000-9999) on a loopback port of the daemon's host:
   * the endpoint's query carries the session's token (runbox_token=...), which the listener
   * checks on each connection's first HTTP request and takes out before forwarding. */
  async resolveExposedPort(port: number): Promise<ExposedPortEndpoint> {
    const known = this.exposed.get(port);
    if (known) return known;
    if (!Number.isInteger(port) || port < 3000 || port > 9999) {
      throw new SandboxConfigurationError(`runbox exposes ports 3000-9999 only (port ${port})`, { provider: 'runbox', port });
    }
    let r: { host: string; host_port: number; token: string };
    try {
      r = await this.transport.json('POST', `${this.base}/ports`, { json: { port } });
    } catch (e) {
      if (e instanceof RunboxServeError && (e.status === 400 || e.status === 409)) {
        throw new SandboxConfigurationError(`runbox: port ${port}: ${e.serveMessage}`, { provider: 'runbox', port });
      }
      throw e;
    }
    const query = `runbox_token=${encodeURIComponent(r.token)}`;
    const endpoint: ExposedPortEndpoint = { host: r.host, port: r.host_port, tls: false, query, url: `http://${r.host}:${r.host_port}/?${query}` };
    this.exposed.set(port, endpoint);
    return endpoint;
  }

  // --- lifecycle -----------------------------------------------------------------------

  /** Closes the serve session (its sandbox killed, its end recorded); idempotent. */
  async close(): Promise<void> {
    this.closing ??= (async () => {
      this.processes.clear();
      try {
        await this.transport.json('DELETE', this.base);
      } catch (e) {
        if (!notFound(e)) {
          this.closing = undefined;
          throw e;
        }
      }
    })();
    await this.closing;
  }

  async delete(): Promise<void> {
    await this.close();
  }

  async shutdown(): Promise<void> {
    await this.close();
  }
}

function dirname(p: string): string {
  const i = p.lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

function assertNoRunAs(runAs?: string): void {
  if (runAs !== undefined && runAs !== '' && runAs !== 'root') {
    throw new SandboxUnsupportedFeatureError(`runbox serve runs every process as the sandbox's root; runAs "${runAs}" is not supported`, {
      provider: 'runbox',
      runAs,
    });
  }
}

function fileMode(permissions: unknown): number | undefined {
  if (typeof permissions === 'number') return permissions & 0o7777;
  return undefined;
}

/**
 * Entries runbox honours: files and directories. A host file or directory, a git checkout or a
 * mount would reach outside the sandbox's own root, which only the operator's policy may grant
 * (its inputs), so they are refused with the SDK's unsupported-feature error before anything
 * is made.
 */
export function assertManifestSupported(manifest: Manifest): void {
  if (manifest.root !== WORKSPACE) {
    throw new SandboxUnsupportedFeatureError(`runbox: the manifest root must be /workspace, not ${manifest.root}`, { provider: 'runbox' });
  }
  if (manifest.extraPathGrants.length > 0) {
    throw new SandboxUnsupportedFeatureError('runbox: extra path grants (host paths) are not supported; the policy decides what a sandbox sees', {
      provider: 'runbox',
    });
  }
  if (manifest.users.length > 0 || manifest.groups.length > 0) {
    throw new SandboxUnsupportedFeatureError('runbox: manifest users and groups are not supported', { provider: 'runbox' });
  }
  for (const { logicalPath, entry } of manifest.iterEntries()) {
    if (entry.type === 'file' || entry.type === 'dir') continue;
    throw new SandboxUnsupportedFeatureError(
      `runbox: manifest entry "${logicalPath}" (${entry.type}) is not supported: host paths and mounts reach a sandbox only as the policy's read-only inputs`,
      { provider: 'runbox', path: logicalPath, type: entry.type },
    );
  }
  if (manifest.entries && Object.keys(manifest.entries).some((k) => k === INPUT_MOUNT || k.startsWith(`${INPUT_MOUNT}/`))) {
    throw new SandboxUnsupportedFeatureError('runbox: /workspace/in is the policy\'s read-only input mount; a manifest cannot write there', {
      provider: 'runbox',
    });
  }
}
