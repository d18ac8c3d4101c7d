// The SDK's apply_patch editor over a runbox session: the SDK's own diff applier (applyDiff)
// between a file read and a file write through runbox serve.
import { applyDiff } from '@openai/agents-core';
import type { Editor, ApplyPatchResult } from '@openai/agents-core';
import type { ApplyPatchOperation } from '@openai/agents-core';
import {
  SandboxApplyPatchFileNotFoundError,
  SandboxApplyPatchDiffError,
  SandboxWorkspaceReadNotFoundError,
} from '@openai/agents-core/sandbox';
import type { RunboxSandboxSession } from './session.js';

/** Editor updates read at most this much of the file they patch (as the SDK's Docker client). */
const MAX_EDIT_BYTES = 10 * 1024 * 1024;

type Op<T extends ApplyPatchOperation['type']> = Extract<ApplyPatchOperation, { type: T }>;

export class RunboxEditor implements Editor {
  constructor(private readonly session: RunboxSandboxSession) {}

  async createFile(op: Op<'create_file'>): Promise<ApplyPatchResult> {
    const content = applyDiff('', op.diff, 'create');
    await this.session.writeFile(op.path, content);
    return {};
  }

  async updateFile(op: Op<'update_file'>): Promise<ApplyPatchResult> {
    let current: string;
    try {
      const bytes = await this.session.readFile({ path: op.path, maxBytes: MAX_EDIT_BYTES + 1 });
      if (bytes.byteLength > MAX_EDIT_BYTES) {
        throw new SandboxApplyPatchDiffError(`${op.path} is larger than ${MAX_EDIT_BYTES} bytes: not edited`, { path: op.path });
      }
      current = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch (e) {
      if (e instanceof SandboxWorkspaceReadNotFoundError) {
        throw new SandboxApplyPatchFileNotFoundError(`File not found: ${op.path}`, { path: op.path });
      }
      throw e;
    }
    const next = applyDiff(current, op.diff);
    if (op.moveTo && this.session.resolvePath(op.moveTo, true) !== this.session.resolvePath(op.path, true)) {
      await this.session.writeFile(op.moveTo, next);
      await this.session.remove(op.path);
    } else {
      await this.session.writeFile(op.path, next);
    }
    return {};
  }

  async deleteFile(op: Op<'delete_file'>): Promise<ApplyPatchResult> {
    if (!(await this.session.pathExists(op.path))) {
      throw new SandboxApplyPatchFileNotFoundError(`File not found: ${op.path}`, { path: op.path });
    }
    await this.session.remove(op.path);
    return {};
  }
}
