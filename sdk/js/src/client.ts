// RunboxSandboxClient: the OpenAI Agents SDK's SandboxClient over `runbox serve`. A session is
// a runbox run; a resume reconnects to its live session or starts a fresh one from its snapshot.
import {
  Manifest,
  SandboxConfigurationError,
  SandboxUnsupportedFeatureError,
  SandboxSnapshotRestoreError,
  normalizeSandboxClientCreateArgs,
} from '@openai/agents-core/sandbox';
import type {
  SandboxArchiveLimits,
  SandboxClient,
  SandboxClientCreateArgs,
  SandboxClientOptions,
  SandboxClientResumeOptions,
  SandboxSessionSerializationOptions,
} from '@openai/agents-core/sandbox';
import { RunboxServeError, RunboxTransport } from './transport.js';
import { RunboxSandboxSession, assertManifestSupported, manifestInputs } from './session.js';
import {
  RUNBOX_BACKEND_ID,
  deserializeRunboxState,
  isRunId,
  isSessionId,
  serializeRunboxState,
  type RunboxSandboxSessionState,
} from './state.js';

/** Per-session choices: all names the operator's configuration knows, never paths. */
export interface RunboxSessionOptions extends SandboxClientOptions {
  image?: string;
  policy?: string;
  tenant?: string;
  agent?: string;
  /** Sent only when set (a daemon without version labels refuses the key). */
  agentVersion?: string;
  /** Closes a session nobody calls for this long: "30s", "10m" or seconds. */
  idleTimeout?: string | number;
  archiveLimits?: SandboxArchiveLimits | null;
}

export type RunboxSandboxClientOptions = RunboxSessionOptions & ({ socketPath: string } | { url: string; key: string });

type ServeSession = {
  id: string;
  run_id: string;
  image: string;
  policy: string;
  tenant: string;
  agent: string;
};

const NAME = /^[A-Za-z0-9._:-]{1,127}$/;
/** What serve takes when a session names no tenant (docs/serve.md). */
const SERVE_DEFAULT_TENANT = 'local';

function checkName(what: string, v: unknown): void {
  if (v !== undefined && (typeof v !== 'string' || !NAME.test(v))) {
    throw new SandboxConfigurationError(`RunboxSandboxClient: ${what} must be a name (letters, digits, . _ - :), got ${JSON.stringify(v)}`);
  }
}

export class RunboxSandboxClient implements SandboxClient<RunboxSessionOptions, RunboxSandboxSessionState> {
  readonly backendId = RUNBOX_BACKEND_ID;
  readonly supportsDefaultOptions = true;
  private readonly transport: RunboxTransport;
  private readonly defaults: RunboxSessionOptions;
  /** The live session behind each state this client made (a serialize refreshes its snapshot). */
  private readonly live = new WeakMap<RunboxSandboxSessionState, RunboxSandboxSession>();

  constructor(options: RunboxSandboxClientOptions) {
    const { socketPath, url, key, ...rest } = options as RunboxSessionOptions & { socketPath?: string; url?: string; key?: string };
    if (socketPath !== undefined && url !== undefined) {
      throw new SandboxConfigurationError('RunboxSandboxClient: give socketPath or url, not both');
    }
    this.transport =
      socketPath !== undefined ? new RunboxTransport({ socketPath }) : new RunboxTransport({ url: url ?? '', key: key ?? '' });
    this.defaults = rest;
    this.checkOptions(rest);
  }

  private checkOptions(o: RunboxSessionOptions): void {
    checkName('image', o.image);
    checkName('policy', o.policy);
    checkName('tenant', o.tenant);
    checkName('agent', o.agent);
    checkName('agentVersion', o.agentVersion);
  }

  private resolveOptions(o?: RunboxSessionOptions): RunboxSessionOptions {
    const merged = { ...this.defaults, ...(o ?? {}) };
    this.checkOptions(merged);
    return merged;
  }

  /** The session-create body of these options (serve's defaults where unset). */
  private createBody(o: RunboxSessionOptions, extra: Record<string, unknown> = {}): Record<string, unknown> {
    const b: Record<string, unknown> = { ...extra };
    if (o.image !== undefined) b.image = o.image;
    if (o.policy !== undefined) b.policy = o.policy;
    if (o.tenant !== undefined) b.tenant = o.tenant;
    if (o.agent !== undefined) b.agent = o.agent;
    if (o.agentVersion !== undefined) b.agent_version = o.agentVersion;
    if (o.idleTimeout !== undefined) b.idle_timeout = o.idleTimeout;
    return b;
  }

  private async openSession(
    o: RunboxSessionOptions,
    manifest: Manifest,
    extra: Record<string, unknown> = {},
  ): Promise<RunboxSandboxSession> {
    const inputs = manifestInputs(manifest);
    const body = this.createBody(o, inputs.length ? { ...extra, manifest: { inputs } } : extra);
    let r: ServeSession;
    try {
      r = await this.transport.json<ServeSession>('POST', '/v1/sessions', { json: body });
    } catch (e) {
      // An input the policy's inputs.allow does not cover (no session was made).
      if (inputs.length && e instanceof RunboxServeError && e.status === 403) {
        throw new SandboxUnsupportedFeatureError(`runbox: the policy refuses a host path of the manifest: ${e.serveMessage}`, {
          provider: 'runbox',
        });
      }
      throw e;
    }
    if (!isSessionId(r.id) || !isRunId(r.run_id)) {
      throw new SandboxConfigurationError(`runbox serve answered a session without ids: ${JSON.stringify(r).slice(0, 200)}`);
    }
    const state: RunboxSandboxSessionState = {
      manifest: new Manifest({ root: manifest.root }),
      sessionId: r.id,
      runId: r.run_id,
      snapshotRef: typeof extra.snapshot === 'string' ? extra.snapshot : null,
      environment: {},
    };
    const session = new RunboxSandboxSession({ transport: this.transport, state, archiveLimits: o.archiveLimits });
    this.live.set(state, session);
    return session;
  }

  async create(args?: SandboxClientCreateArgs<RunboxSessionOptions> | Manifest, manifestOptions?: RunboxSessionOptions): Promise<RunboxSandboxSession> {
    const a = normalizeSandboxClientCreateArgs(args, manifestOptions);
    const o = this.resolveOptions(a.options);
    if (a.archiveLimits !== undefined) o.archiveLimits = a.archiveLimits;
    // Refused before any sandbox exists: a host path or mount entry never half-applies.
    assertManifestSupported(a.manifest, { inputs: true });
    const session = await this.openSession(o, a.manifest);
    try {
      await session.layManifest(a.manifest);
    } catch (e) {
      await session.close().catch(() => undefined);
      throw e;
    }
    return session;
  }

  /**
   * Reconnects to the live session of the state's run when this client's image, policy, tenant
   * and agent match it; otherwise a fresh session from the state's snapshot (fresh credentials:
   * the environment comes from the trusted manifest, never from serialized state).
   */
  async resume(state: RunboxSandboxSessionState, options: SandboxClientResumeOptions<RunboxSessionOptions> = {}): Promise<RunboxSandboxSession> {
    if (!isRunId(state.runId)) throw new SandboxConfigurationError('runbox resume: the state has no valid run id');
    const o = this.resolveOptions(options.clientOptions);
    if (options.archiveLimits !== undefined) o.archiveLimits = options.archiveLimits;
    const manifest = state.manifest ?? new Manifest();
    assertManifestSupported(manifest, { inputs: true });
    const { sessions } = await this.transport.json<{ sessions: ServeSession[] }>('GET', '/v1/sessions');
    const mine = sessions.find(
      (s) =>
        s.run_id === state.runId &&
        isSessionId(s.id) &&
        (o.image ?? 'host') === s.image &&
        (o.policy ?? 'default') === s.policy &&
        (o.tenant ?? SERVE_DEFAULT_TENANT) === s.tenant &&
        (o.agent ?? 'serve') === s.agent,
    );
    const env = await manifest.resolveEnvironment();
    if (mine) {
      const st: RunboxSandboxSessionState = {
        manifest,
        sessionId: mine.id,
        runId: mine.run_id,
        snapshotRef: state.snapshotRef,
        environment: env,
        workspaceReady: true,
      };
      const session = new RunboxSandboxSession({ transport: this.transport, state: st, archiveLimits: o.archiveLimits });
      this.live.set(st, session);
      return session;
    }
    let session: RunboxSandboxSession;
    if (state.snapshotRef) {
      try {
        session = await this.openSession(o, manifest, { snapshot: state.snapshotRef });
      } catch (e) {
        if (e instanceof RunboxServeError && e.status < 500) {
          throw new SandboxSnapshotRestoreError(`runbox: a session from snapshot ${state.snapshotRef}: ${e.serveMessage}`, {
            snapshotRef: state.snapshotRef,
          });
        }
        throw e;
      }
    } else {
      session = await this.openSession(o, manifest);
    }
    try {
      // The manifest's entries are laid again only where the snapshot has nothing (a session
      // that never persisted); its environment always comes from it.
      if (state.snapshotRef) {
        session.state.manifest = manifest;
        session.state.environment = env;
      } else {
        await session.layManifest(manifest);
      }
    } catch (e) {
      await session.close().catch(() => undefined);
      throw e;
    }
    session.state.workspaceReady = true;
    return session;
  }

  async delete(state: RunboxSandboxSessionState): Promise<void> {
    const s = this.live.get(state);
    if (s) {
      await s.close();
      return;
    }
    if (!isSessionId(state.sessionId)) return;
    try {
      await this.transport.json('DELETE', `/v1/sessions/${state.sessionId}`);
    } catch (e) {
      if (!(e instanceof RunboxServeError && e.status === 404)) throw e;
    }
  }

  /**
   * The run id and the snapshot ref, nothing else. A live session is snapshotted first (also one
   * the SDK keeps live: a RunState may be resumed in another process, after that session is
   * gone), so the ref names its workspace as it is now.
   */
  async serializeSessionState(state: RunboxSandboxSessionState, _options?: SandboxSessionSerializationOptions): Promise<Record<string, unknown>> {
    const s = this.live.get(state);
    if (s && (await s.running())) await s.snapshot();
    return serializeRunboxState(state);
  }

  async deserializeSessionState(state: Record<string, unknown>): Promise<RunboxSandboxSessionState> {
    return deserializeRunboxState(state);
  }

  canPersistOwnedSessionState(): boolean {
    return true;
  }

  /** Ends this client's connections (sessions stay: close them first). */
  close(): void {
    this.transport.close();
  }
}
