// The session state a RunboxSandboxClient keeps, and its serialized form: the run id and the
// snapshot reference only. Serialized state is untrusted input; it is checked key by key.
import type { SandboxSessionState } from '@openai/agents-core/sandbox';
import { Manifest } from '@openai/agents-core/sandbox';
import { deserializeManifest } from '@openai/agents-core/sandbox/internal';
import { SandboxConfigurationError } from '@openai/agents-core/sandbox';

export const RUNBOX_BACKEND_ID = 'runbox';

/** What a live or resumable runbox session is known by. */
export interface RunboxSandboxSessionState extends SandboxSessionState {
  /** The daemon's session id (32 hex digits); never serialized. */
  sessionId: string;
  /** The session's run id in runbox's ledger. */
  runId: string;
  /** The newest snapshot of /workspace in runbox's store ("sha256:<hex>"), if any. */
  snapshotRef: string | null;
  /** Process environment (the manifest's, resolved); never serialized. */
  environment: Record<string, string>;
}

const SESSION_ID = /^[0-9a-f]{32}$/;
const RUN_ID = /^[0-9a-f]{16,64}$/;
const SNAPSHOT_REF = /^sha256:[0-9a-f]{64}$/;

export function isSessionId(v: unknown): v is string {
  return typeof v === 'string' && SESSION_ID.test(v);
}
export function isRunId(v: unknown): v is string {
  return typeof v === 'string' && RUN_ID.test(v);
}
export function isSnapshotRef(v: unknown): v is string {
  return typeof v === 'string' && SNAPSHOT_REF.test(v);
}

/** The provider part of the SDK's envelope: nothing but the run id and the snapshot ref. */
export function serializeRunboxState(state: RunboxSandboxSessionState): Record<string, unknown> {
  return { runId: state.runId, snapshotRef: state.snapshotRef };
}

/**
 * Rebuilds a state from serialized provider state (the SDK adds `manifest` and its own
 * envelope fields). Anything else a caller put there (a session id, an environment, a path)
 * is dropped; the ids must have their exact shapes.
 */
export function deserializeRunboxState(raw: Record<string, unknown>): RunboxSandboxSessionState {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new SandboxConfigurationError('runbox session state: expected an object');
  }
  if (!isRunId(raw.runId)) {
    throw new SandboxConfigurationError('runbox session state: $.runId: expected a run id (16-64 hex digits)', {
      provider: RUNBOX_BACKEND_ID,
    });
  }
  const ref = raw.snapshotRef ?? null;
  if (ref !== null && !isSnapshotRef(ref)) {
    throw new SandboxConfigurationError('runbox session state: $.snapshotRef: expected null or "sha256:" and 64 hex digits', {
      provider: RUNBOX_BACKEND_ID,
    });
  }
  let manifest: Manifest;
  if (raw.manifest === undefined) {
    manifest = new Manifest();
  } else if (typeof raw.manifest === 'object' && raw.manifest !== null && !Array.isArray(raw.manifest)) {
    manifest = deserializeManifest(raw.manifest as Record<string, unknown>);
  } else {
    throw new SandboxConfigurationError('runbox session state: $.manifest: expected an object');
  }
  const state: RunboxSandboxSessionState = {
    manifest,
    sessionId: '',
    runId: raw.runId,
    snapshotRef: ref,
    environment: {},
  };
  // The SDK's own envelope fields ride along for its checks; they are not runbox's authority.
  if (typeof raw.workspaceReady === 'boolean') state.workspaceReady = raw.workspaceReady;
  return state;
}
