// Memory over many sessions: 1,000 create/generate/close cycles on one model keep the process's
// RSS flat, and so do sessions left to the GC and models loaded and closed again. RSS is read
// after a warm-up (allocator pools, JIT, the thread pools' first stacks) and at the end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

const llm = createRequire(import.meta.url)(process.env.EDGELLM_NAPI_MODULE);
const MODEL = join(process.env.EDGELLM_SHARED_DATA, 'models', 'stories260K.gguf');
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const MiB = 1024 * 1024;
// Allowed growth between the warm-up and the end: a leak of a session's KV (2.5 MiB at the
// default context of 2048) or of its scratch, per cycle, would exceed it within a few cycles.
const BOUND = 8 * MiB;

function rss() {
  gc();
  return process.memoryUsage().rss;
}

async function cycles(model, n, close) {
  for (let i = 0; i < n; ++i) {
    const s = model.createSession({ threads: 2 });
    const r = await s.generate('Once upon a time', { maxTokens: 8, temperature: 0 }, () => {});
    assert.equal(r.tokens.length, 8);
    if (close) s.close();
    else if (i % 50 === 49) gc();  // let the finalizers run
  }
}

test('1,000 create/generate/close cycles keep RSS flat', async () => {
  const model = await llm.loadModel(MODEL);
  await cycles(model, 500, true);  // the allocator's arenas settle within a few hundred cycles
  const before = rss();
  const t0 = performance.now();
  await cycles(model, 1000, true);
  const ms = performance.now() - t0;
  const after = rss();
  console.log(`# rss after warm-up ${(before / MiB).toFixed(1)} MiB, after 1000 cycles ${(after / MiB).toFixed(1)} MiB ` +
              `(${((after - before) / MiB).toFixed(2)} MiB), ${(ms / 1000).toFixed(3)} ms per cycle`);
  assert.ok(after - before < BOUND, `RSS grew by ${((after - before) / MiB).toFixed(1)} MiB`);
  model.close();
});

test('sessions left to the GC are freed by their finalizers', async () => {
  const model = await llm.loadModel(MODEL);
  await cycles(model, 100, false);
  const before = rss();
  await cycles(model, 500, false);
  const after = rss();
  console.log(`# GC'd sessions: rss ${(before / MiB).toFixed(1)} -> ${(after / MiB).toFixed(1)} MiB`);
  assert.ok(after - before < BOUND, `RSS grew by ${((after - before) / MiB).toFixed(1)} MiB`);
  model.close();
});

test('models loaded and closed again', async () => {
  const once = async () => {
    const m = await llm.loadModel(MODEL);
    const s = m.createSession();
    await s.generate('Once upon a time', { maxTokens: 4 });
    m.close();  // the session still holds the weights ...
    s.close();  // ... until here
  };
  for (let i = 0; i < 20; ++i) await once();
  const before = rss();
  for (let i = 0; i < 200; ++i) await once();
  const after = rss();
  console.log(`# 200 load/close: rss ${(before / MiB).toFixed(1)} -> ${(after / MiB).toFixed(1)} MiB`);
  assert.ok(after - before < BOUND, `RSS grew by ${((after - before) / MiB).toFixed(1)} MiB`);
});
