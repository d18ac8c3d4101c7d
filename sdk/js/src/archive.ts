// Checks a workspace tar before it is unpacked by a daemon that has no hydrate call of its own:
// member and byte bounds, and no member (or link target) that leaves /workspace.
import { Buffer } from 'node:buffer';
import { SandboxArchiveError } from '@openai/agents-core/sandbox';
import type { ResolvedSandboxArchiveLimits } from '@openai/agents-core/sandbox';

function field(h: Buffer, off: number, len: number): string {
  const end = h.indexOf(0, off);
  return h.toString('utf8', off, end < 0 || end > off + len ? off + len : end);
}

function octal(h: Buffer, off: number, len: number, what: string): number {
  const s = field(h, off, len).trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new SandboxArchiveError(`workspace archive: bad ${what} field "${s}"`);
  return parseInt(s, 8);
}

/** A member name stays inside the archive's root: relative, no `..` component. */
function escapes(name: string): boolean {
  if (name.startsWith('/')) return true;
  return name.split('/').some((c) => c === '..');
}

/** A symlink at `name` whose target, walked from the link's directory, climbs above the root. */
function linkEscapes(name: string, link: string): boolean {
  if (link.startsWith('/')) return true;
  let depth = name.split('/').length - 1;
  for (const c of link.split('/')) {
    if (c === '..') depth--;
    else if (c !== '.' && c !== '') depth++;
    if (depth < 0) return true;
  }
  return false;
}

/**
 * Walks a ustar/GNU tar: throws SandboxArchiveError when a member is absolute, has a `..`
 * component, is a device or fifo, is a link whose target leaves the root, or when the member
 * count or the extracted size is over the limits.
 */
export function checkWorkspaceTar(data: Uint8Array, limits: ResolvedSandboxArchiveLimits | null): { members: number; bytes: number } {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (limits?.maxInputBytes != null && buf.byteLength > limits.maxInputBytes) {
    throw new SandboxArchiveError(`workspace archive: ${buf.byteLength} bytes is over the limit of ${limits.maxInputBytes}`);
  }
  let off = 0;
  let members = 0;
  let bytes = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  while (off + 512 <= buf.byteLength) {
    const h = buf.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = octal(h, 124, 12, 'size');
    const type = String.fromCharCode(h[156] || 48);
    const body = buf.subarray(off + 512, off + 512 + size);
    off += 512 + Math.ceil(size / 512) * 512;
    if (off > buf.byteLength + 512) throw new SandboxArchiveError('workspace archive: truncated member');
    if (type === 'L' || type === 'K') {
      const v = body.toString('utf8').replace(/\0.*$/s, '');
      if (type === 'L') longName = v;
      else longLink = v;
      continue;
    }
    if (type === 'x' || type === 'g') {
      const m = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'));
      if (m && type === 'x') longName = m[1];
      continue;
    }
    const prefix = h.toString('utf8', 257, 263).startsWith('ustar') ? field(h, 345, 155) : '';
    let name = longName ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    const link = longLink ?? field(h, 157, 100);
    longName = longLink = undefined;
    name = name.replace(/^(\.\/)+/, '');
    if (name === '' || name === '.') continue;
    if (escapes(name)) throw new SandboxArchiveError(`workspace archive: member "${name}" leaves /workspace`);
    if (type === '3' || type === '4' || type === '6') {
      throw new SandboxArchiveError(`workspace archive: member "${name}" is a device or fifo`);
    }
    if (type === '1' && escapes(link)) throw new SandboxArchiveError(`workspace archive: hard link "${name}" -> "${link}" leaves /workspace`);
    if (type === '2' && linkEscapes(name, link)) {
      throw new SandboxArchiveError(`workspace archive: symlink "${name}" -> "${link}" leaves /workspace`);
    }
    members++;
    bytes += size;
    if (limits?.maxMembers != null && members > limits.maxMembers) {
      throw new SandboxArchiveError(`workspace archive: more than ${limits.maxMembers} members`);
    }
    if (limits?.maxExtractedBytes != null && bytes > limits.maxExtractedBytes) {
      throw new SandboxArchiveError(`workspace archive: more than ${limits.maxExtractedBytes} bytes extracted`);
    }
  }
  return { members, bytes };
}
