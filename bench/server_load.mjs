#!/usr/bin/env node
// Load test for an OpenAI-compatible server (edgellm-server or llama-server) on loopback: C
// concurrent clients each send R /v1/completions requests back to back (greedy, a shared
// instruction prefix and a per-request ending), then prints requests/s, generated tokens/s,
// latency p50/p99, failed requests and the server's RSS (start, peak, end; sampled from
// /proc/PID/status every 100 ms). Plain fetch (node 18+), no packages. Not a ctest: it takes
// minutes on a large model and its figures depend on the machine.
//
// usage: node bench/server_load.mjs --url http://127.0.0.1:8080 [--pid PID] [--clients 16]
//          [--requests 20] [--max-tokens 16] [--api-key KEY] [--label NAME] [--json]
import { readFileSync } from 'node:fs';

const opt = { url: 'http://127.0.0.1:8080', clients: 16, requests: 20, 'max-tokens': 16, pid: 0, 'api-key': '', label: '', json: false };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  const k = argv[i].replace(/^--/, '');
  if (!(k in opt)) { console.error(`error: unknown option ${argv[i]}`); process.exit(1); }
  if (typeof opt[k] === 'boolean') { opt[k] = true; continue; }
  const v = argv[++i];
  if (v === undefined) { console.error(`error: option --${k} needs a value`); process.exit(1); }
  if (typeof opt[k] === 'number') {
    opt[k] = Number(v);
    if (!Number.isInteger(opt[k]) || opt[k] < 0) { console.error(`error: option --${k}: expected a whole number, got '${v}'`); process.exit(1); }
  } else opt[k] = v;
}

const rssKiB = () => {
  if (!opt.pid) return 0;
  try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${opt.pid}/status`, 'utf8'))[1]); } catch { return 0; }
};
const prefix = 'Once upon a time, in a small town by the sea, there lived a kind old fisherman who told stories to the children every evening. ';
const endings = ['One day,', 'The little dog', 'Lily and Tom', 'A bird sang', 'The sun was', 'Sam had a red ball.', 'Mom said', 'In the park,'];
const headers = { 'Content-Type': 'application/json' };
if (opt['api-key']) headers.Authorization = `Bearer ${opt['api-key']}`;

async function one(client, i) {
  const body = { prompt: prefix + endings[(client + i) % endings.length], max_tokens: opt['max-tokens'], temperature: 0 };
  const t0 = performance.now();
  try {
    const res = await fetch(`${opt.url}/v1/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
    const j = await res.json();
    if (res.status !== 200 || !j.choices) return { ok: false, ms: performance.now() - t0, why: `${res.status} ${JSON.stringify(j).slice(0, 200)}` };
    return { ok: true, ms: performance.now() - t0, tokens: j.usage?.completion_tokens ?? 0 };
  } catch (e) {
    return { ok: false, ms: performance.now() - t0, why: String(e) };
  }
}

const pct = (sorted, p) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : 0;

// One warm-up request (model pages, first allocations), then the measured run.
await one(0, 0);
const rssStart = rssKiB();
let rssPeak = rssStart;
const sampler = setInterval(() => { rssPeak = Math.max(rssPeak, rssKiB()); }, 100);
const t0 = performance.now();
const results = (await Promise.all(Array.from({ length: opt.clients }, async (_, c) => {
  const out = [];
  for (let i = 0; i < opt.requests; ++i) out.push(await one(c, i));
  return out;
}))).flat();
const wall = (performance.now() - t0) / 1000;
clearInterval(sampler);
const rssEnd = rssKiB();
rssPeak = Math.max(rssPeak, rssEnd);

const ok = results.filter((r) => r.ok);
const lat = ok.map((r) => r.ms).sort((a, b) => a - b);
const tokens = ok.reduce((s, r) => s + r.tokens, 0);
const summary = {
  label: opt.label, clients: opt.clients, requests: results.length, failed: results.length - ok.length,
  wall_s: +wall.toFixed(2), requests_per_s: +(ok.length / wall).toFixed(2), tokens_per_s: +(tokens / wall).toFixed(1),
  latency_p50_ms: +pct(lat, 50).toFixed(1), latency_p99_ms: +pct(lat, 99).toFixed(1),
  rss_start_mib: +(rssStart / 1024).toFixed(1), rss_peak_mib: +(rssPeak / 1024).toFixed(1), rss_end_mib: +(rssEnd / 1024).toFixed(1),
};
if (opt.json) console.log(JSON.stringify(summary));
else {
  console.log(`${opt.label || opt.url}: ${summary.requests} requests from ${opt.clients} clients in ${summary.wall_s} s: ` +
              `${summary.requests_per_s} req/s, ${summary.tokens_per_s} generated tokens/s, latency p50 ${summary.latency_p50_ms} ms ` +
              `p99 ${summary.latency_p99_ms} ms, ${summary.failed} failed` +
              (opt.pid ? `, RSS ${summary.rss_start_mib} -> ${summary.rss_end_mib} MiB (peak ${summary.rss_peak_mib})` : ''));
}
for (const r of results.filter((x) => !x.ok).slice(0, 3)) console.error(`failed: ${r.why}`);
process.exit(summary.failed ? 1 : 0);
