// `make bench-serve-e2b`: runbox serve through the unmodified e2b SDK against runbox's native API
// in the same run (a real daemon, tests/e2b/daemon.mjs): create to the first command's end, and
// one commands.run('true') round trip. E2B's own published figure is printed for context only.
// Knobs: BENCH_CREATES (10), BENCH_RUNS (30), BENCH_IMAGE (the default image, host).
import http from 'node:http';
import path from 'node:path';

import { ROOT, startDaemon } from '../tests/e2b/daemon.mjs';

const { Sandbox } = await import(path.join(ROOT, 'tests/e2b/node_modules/e2b/dist/index.mjs'));

const CREATES = Number(process.env.BENCH_CREATES || 10);
const RUNS = Number(process.env.BENCH_RUNS || 30);
const IMAGE = process.env.BENCH_IMAGE || '';
// E2B's create-to-first-command, a third-party median (ComputeSDK's sandbox benchmarks, 2025).
const E2B_PUBLISHED_S = 0.44;

function native(sock, method, p, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ socketPath: sock, method, path: p, headers: { 'Content-Type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => {
          if (res.statusCode >= 400) reject(new Error(`${method} ${p}: ${res.statusCode} ${text}`));
          else resolve(text ? JSON.parse(text) : {});
        });
      });
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

// One process to its end through the native API: start, then long-poll its output.
async function nativeRun(sock, sid, argv) {
  const p = await native(sock, 'POST', `/v1/sessions/${sid}/processes`, { argv });
  let after = 0;
  for (;;) {
    const o = await native(sock, 'GET', `/v1/sessions/${sid}/processes/${p.id}/output?after_seq=${after}&wait_ms=60000`);
    after = o.next_seq;
    if (o.exited) return o.result;
  }
}

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const p90 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(s.length * 0.9) - 1)]; };
const ms = (x) => `${x.toFixed(1)} ms`;

const d = await startDaemon();
try {
  const opts = d.opts();
  const tpl = IMAGE || undefined;
  const e2bCreate = [];
  const natCreate = [];
  // Interleaved, so both see the same host load.
  for (let i = 0; i < CREATES; i++) {
    let t = performance.now();
    const sbx = tpl ? await Sandbox.create(tpl, opts) : await Sandbox.create(opts);
    await sbx.commands.run('true');
    e2bCreate.push(performance.now() - t);
    await sbx.kill();
    t = performance.now();
    const s = await native(d.sock, 'POST', '/v1/sessions', IMAGE ? { image: IMAGE } : {});
    // The command the SDK's first call runs (a login bash; sh on an image without bash).
    await nativeRun(d.sock, s.id, IMAGE === 'minimal' ? ['/bin/sh', '-l', '-c', 'true'] : ['/bin/bash', '-l', '-c', 'true']);
    natCreate.push(performance.now() - t);
    await native(d.sock, 'DELETE', `/v1/sessions/${s.id}`);
  }
  const sbx = tpl ? await Sandbox.create(tpl, opts) : await Sandbox.create(opts);
  const s = await native(d.sock, 'POST', '/v1/sessions', IMAGE ? { image: IMAGE } : {});
  const e2bRun = [];
  const natRun = [];
  const natBash = [];
  for (let i = 0; i < RUNS; i++) {
    let t = performance.now();
    await sbx.commands.run('true');
    e2bRun.push(performance.now() - t);
    t = performance.now();
    await nativeRun(d.sock, s.id, ['true']);
    natRun.push(performance.now() - t);
    // What the SDK's call runs (a login bash), through the native API.
    t = performance.now();
    await nativeRun(d.sock, s.id, ['/bin/bash', '-l', '-c', 'true']);
    natBash.push(performance.now() - t);
  }
  await sbx.kill();
  await native(d.sock, 'DELETE', `/v1/sessions/${s.id}`);

  const row = (name, a, base) => console.log(`${name.padEnd(52)} median ${ms(median(a)).padStart(10)}  p90 ${ms(p90(a)).padStart(10)}` +
    (base ? `  x${(median(a) / median(base)).toFixed(2)} of native` : ''));
  console.log(`runbox serve, E2B SDK 2.51.0 against the native API (image ${IMAGE || 'host'}; ${CREATES} creates, ${RUNS} runs)`);
  row("create -> first command's end, E2B SDK", e2bCreate, natCreate);
  row("create -> first command's end, native API", natCreate);
  row("commands.run('true'), E2B SDK (bash -l -c true)", e2bRun, natBash);
  row("process ['/bin/bash','-l','-c','true'], native API", natBash);
  row("process ['true'], native API", natRun);
  console.log(`E2B (microVM), create -> first command, published third-party median: ${E2B_PUBLISHED_S * 1000} ms ` +
    `(runbox through the E2B SDK: x${(median(e2bCreate) / (E2B_PUBLISHED_S * 1000)).toFixed(2)} of it; not measured here)`);
} finally {
  await d.stop();
}
