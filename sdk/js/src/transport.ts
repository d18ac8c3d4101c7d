// HTTP/1.1 to `runbox serve`: over its unix socket (node's http with socketPath) or over a
// loopback TCP URL with a bearer key. One keep-alive agent per client; errors carry the status.
import * as http from 'node:http';
import { Buffer } from 'node:buffer';

export type RunboxEndpoint = { socketPath: string } | { url: string; key: string };

/** A reply of runbox serve that was not a 2xx: its status and its `error` text. */
export class RunboxServeError extends Error {
  readonly status: number;
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, status: number, message: string) {
    super(`runbox serve ${method} ${path}: ${status} ${message}`);
    this.name = 'RunboxServeError';
    this.status = status;
    this.method = method;
    this.path = path;
  }
  /** The router's answer for an API path it does not know (not a missing file). */
  get routeMissing(): boolean {
    return this.status === 404 && /^no such path( \(|$)/.test(this.serveMessage);
  }
  get serveMessage(): string {
    const i = this.message.indexOf(`: ${this.status} `);
    return i < 0 ? this.message : this.message.slice(i + `: ${this.status} `.length);
  }
}

export type RequestOptions = {
  query?: Record<string, string | number | boolean | undefined>;
  json?: unknown;
  body?: Uint8Array | string;
  timeoutMs?: number;
  /** Read at most this many bytes of a 2xx body: the rest is not transferred (the socket closes). */
  limitBytes?: number;
};

export class RunboxTransport {
  readonly endpoint: RunboxEndpoint;
  private readonly agent: http.Agent;
  private readonly base?: URL;

  constructor(endpoint: RunboxEndpoint) {
    if ('socketPath' in endpoint) {
      if (typeof endpoint.socketPath !== 'string' || endpoint.socketPath === '') {
        throw new TypeError('RunboxSandboxClient: socketPath must be a non-empty string');
      }
    } else {
      const u = new URL(endpoint.url);
      if (u.protocol !== 'http:') {
        throw new TypeError(`RunboxSandboxClient: url ${endpoint.url}: only http:// (loopback) is supported`);
      }
      if (typeof endpoint.key !== 'string' || endpoint.key === '' || /[\r\n]/.test(endpoint.key)) {
        throw new TypeError('RunboxSandboxClient: key must be a non-empty single-line string');
      }
      this.base = u;
    }
    this.endpoint = endpoint;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  }

  close(): void {
    this.agent.destroy();
  }

  /** One call; resolves with the raw body of a 2xx reply, rejects with RunboxServeError. */
  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Buffer> {
    let fullPath = path;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined) q.set(k, String(v));
    }
    const qs = q.toString();
    if (qs) fullPath += `?${qs}`;
    let payload: Buffer | undefined;
    const headers: Record<string, string> = {};
    if (opts.json !== undefined) {
      payload = Buffer.from(JSON.stringify(opts.json));
      headers['content-type'] = 'application/json';
    } else if (opts.body !== undefined) {
      payload = typeof opts.body === 'string' ? Buffer.from(opts.body) : Buffer.from(opts.body.buffer, opts.body.byteOffset, opts.body.byteLength);
      headers['content-type'] = 'application/octet-stream';
    }
    if (payload) headers['content-length'] = String(payload.byteLength);
    else if (method !== 'GET' && method !== 'DELETE') headers['content-length'] = '0';
    const target: http.RequestOptions = { method, headers, agent: this.agent };
    if ('socketPath' in this.endpoint) {
      target.socketPath = this.endpoint.socketPath;
      target.path = fullPath;
      headers.host = 'runbox';
    } else {
      target.hostname = this.base!.hostname;
      target.port = this.base!.port;
      target.path = this.base!.pathname.replace(/\/$/, '') + fullPath;
      headers.authorization = `Bearer ${this.endpoint.key}`;
    }
    return await new Promise<Buffer>((resolve, reject) => {
      const req = http.request(target, (res) => {
        const parts: Buffer[] = [];
        let got = 0;
        const ok = (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;
        res.on('data', (d: Buffer) => {
          parts.push(d);
          got += d.byteLength;
          if (ok && opts.limitBytes !== undefined && got >= opts.limitBytes) {
            res.destroy();
            resolve(Buffer.concat(parts).subarray(0, opts.limitBytes));
          }
        });
        res.on('error', reject);
        res.on('end', () => {
          const buf = Buffer.concat(parts);
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            resolve(buf);
            return;
          }
          let msg = buf.toString('utf8');
          try {
            const j = JSON.parse(msg);
            if (j && typeof j.error === 'string') msg = j.error;
          } catch {
            /* not JSON: keep the text */
          }
          reject(new RunboxServeError(method, path, status, msg));
        });
      });
      req.on('error', reject);
      req.setTimeout(opts.timeoutMs ?? 120_000, () => {
        req.destroy(new Error(`runbox serve ${method} ${path}: no reply in ${opts.timeoutMs ?? 120_000} ms`));
      });
      req.end(payload);
    });
  }

  async json<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const buf = await this.raw(method, path, opts);
    return JSON.parse(buf.toString('utf8')) as T;
  }
}
