// A SandboxSession over one `runbox serve` session: commands are serve processes (long-polled
// for the SDK's yield time), files are serve file calls, snapshots are serve snapshots.
import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { resolve as pathResolve } from 'node:path';
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
/** The JSON of one manifest call at most (serve's JSON bodies are at most 1 MiB). */
const MANIFEST_BATCH_BYTES = 512 * 1024;

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
    await this.layManifest(manifest);
  }

  /**
   * The manifest's files and directories through serve's manifest call (recorded there as a
   * `manifest` event; ephemeral files by path only, and left out of the daemon's snapshots), in
   * batches under serve's JSON body cap. Host-path entries are left out: a create mounted them.
   */
  async layManifest(manifest: Manifest): Promise<void> {
    const ephemeral = [...manifest.ephemeralEntryPaths()];
    const isEphemeral = (p: string) => ephemeral.some((e) => p === e || p.startsWith(`${e}/`));
    let batch: { files: Record<string, unknown>[]; directories: Record<string, unknown>[] } = { files: [], directories: [] };
    let size = 0;
    const flush = async () => {
      if (batch.files.length === 0 && batch.directories.length === 0) return;
      const body: Record<string, unknown> = {};
      if (batch.files.length) body.files = batch.files;
      if (batch.directories.length) body.directories = batch.directories;
      batch = { files: [], directories: [] };
      size = 0;
      try {
        await this.transport.json('POST', `${this.base}/manifest`, { json: body });
      } catch (e) {
        if (e instanceof RunboxServeError && e.status === 403) {
          throw new SandboxUnsupportedFeatureError(`runbox: the policy refuses a manifest entry: ${e.serveMessage}`, { provider: 'runbox' });
        }
        throw e;
      }
    };
    for (const { logicalPath, absolutePath, entry } of manifest.iterEntries()) {
      const mode = fileMode(entry.permissions);
      const m = mode === undefined ? {} : { mode: mode.toString(8).padStart(4, '0') };
      if (entry.type === 'dir') {
        batch.directories.push({ path: absolutePath, ...m });
        size += absolutePath.length + 64;
      } else if (entry.type === 'file') {
        const b64 = (typeof entry.content === 'string' ? Buffer.from(entry.content, 'utf8') : Buffer.from(entry.content)).toString('base64');
        const eph = isEphemeral(logicalPath);
        if (b64.length + absolutePath.length + 128 > MANIFEST_BATCH_BYTES) {
          // Too big for one JSON body: streamed by PUT, which records its digest.
          if (eph) {
            throw new SandboxUnsupportedFeatureError(
              `runbox: ephemeral file "${logicalPath}" is over ${MANIFEST_BATCH_BYTES * 0.75} bytes (an ephemeral file goes in serve's manifest call, a JSON body)`,
              { provider: 'runbox', path: logicalPath },
            );
          }
          await flush();
          await this.writeFile(absolutePath, entry.content, mode);
          continue;
        }
        if (size + b64.length + absolutePath.length + 128 > MANIFEST_BATCH_BYTES) await flush();
        batch.files.push({ path: absolutePath, content: b64, encoding: 'base64', ...m, ...(eph ? { ephemeral: true } : {}) });
        size += b64.length + absolutePath.length + 128;
      }
    }
    await flush();
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
 * Entries runbox honours: files and directories; and, when a session is made (inputs), host
 * files and directories placed under /workspace/in, which the daemon mounts read-only where the
 * policy's inputs.allow covers them (else its 403 is the SDK's unsupported-feature error). Any
 * other host path, a git checkout or a mount would reach outside the sandbox's own root, which
 * only the operator's policy may grant, so they are refused with the SDK's unsupported-feature
 * error before anything is made.
 */
export function assertManifestSupported(manifest: Manifest, opts: { inputs?: boolean } = {}): void {
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
    if ((entry.type === 'local_file' || entry.type === 'local_dir') && isInputPath(logicalPath)) {
      if (opts.inputs) continue;
      throw new SandboxUnsupportedFeatureError(
        `runbox: manifest entry "${logicalPath}" (${entry.type}): host paths are the policy's read-only inputs, mounted when a session is made, not into a live one`,
        { provider: 'runbox', path: logicalPath, type: entry.type },
      );
    }
    throw new SandboxUnsupportedFeatureError(
      `runbox: manifest entry "${logicalPath}" (${entry.type}) is not supported: host paths and mounts reach a sandbox only as the policy's read-only inputs, under /workspace/${INPUT_MOUNT}/`,
      { provider: 'runbox', path: logicalPath, type: entry.type },
    );
  }
  const written = [...manifest.iterEntries()].filter((e) => e.entry.type === 'file' || e.entry.type === 'dir');
  if (written.some((e) => e.logicalPath === INPUT_MOUNT || e.logicalPath.startsWith(`${INPUT_MOUNT}/`))) {
    throw new SandboxUnsupportedFeatureError('runbox: /workspace/in is the policy\'s read-only input mount; a manifest cannot write there', {
      provider: 'runbox',
    });
  }
}

function isInputPath(logicalPath: string): boolean {
  return logicalPath.startsWith(`${INPUT_MOUNT}/`) && logicalPath.length > INPUT_MOUNT.length + 1;
}

/** The manifest's host-path entries as serve's create takes them: {from, to} read-only inputs. */
export function manifestInputs(manifest: Manifest): { from: string; to: string }[] {
  const out: { from: string; to: string }[] = [];
  for (const { logicalPath, absolutePath, entry } of manifest.iterEntries()) {
    if ((entry.type === 'local_file' || entry.type === 'local_dir') && isInputPath(logicalPath)) {
      out.push({ from: pathResolve(entry.src), to: absolutePath });
    }
  }
  return out;
}
