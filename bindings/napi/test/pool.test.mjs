// Generation does not hold libuv's worker pool (4 threads, shared with fs and dns): with 8
// generations running, fs.promises.readFile completes while every one of them is still running
// (on the pool it would wait for one of them to end). Run by ctest through run.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const llm = createRequire(import.meta.url)(process.env.EDGELLM_NAPI_MODULE);
const MODEL = join(process.env.EDGELLM_SHARED_DATA, 'models', 'stories260K.gguf');

test('8 concurrent generations leave the worker pool to fs', async () => {
  const model = await llm.loadModel(MODEL, { threads: 1, ctx: 2048 });
  const sessions = Array.from({ length: 8 }, () => model.createSession());
  let settled = 0;
  let pieces = 0;
  let allDecoding;
  const started = new Promise((resolve) => { allDecoding = resolve; });
  for (const s of sessions) {
    s.generate('Once upon a time', { maxTokens: 1800, temperature: 0, ignoreEos: true }, () => {
      if (++pieces === 8 * 2) allDecoding();  // the generations are decoding
    }).then(() => { ++settled; }, () => { ++settled; });
  }
  let timer;
  await Promise.race([started, new Promise((r) => { timer = setTimeout(r, 20000); })]);
  clearTimeout(timer);
  const t0 = performance.now();
  const text = await readFile(fileURLToPath(import.meta.url), 'utf8');
  const ms = performance.now() - t0;
  const running = 8 - settled;
  console.log(`fs.readFile with 8 generations running: ${ms.toFixed(1)} ms; ${running} of 8 still running when it returned`);
  assert.ok(text.includes('worker pool'));
  assert.equal(settled, 0, 'readFile waited for a generation to end');
  for (const s of sessions) s.cancel();
  while (settled < 8) await new Promise((r) => setTimeout(r, 10));
  for (const s of sessions) s.close();
});
