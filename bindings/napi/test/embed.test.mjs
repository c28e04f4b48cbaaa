// model.embed() against stories260K: the vectors of llama.cpp's llama-embedding (mean pooling,
// tests/data/embed-stories260K-mean.json) within 1e-4 cosine, Float32Array results in order, a
// single string, normalize false, pooling options and errors. Run by ctest through run.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const llm = createRequire(import.meta.url)(process.env.EDGELLM_NAPI_MODULE);
const MODEL = join(process.env.EDGELLM_SHARED_DATA, 'models', 'stories260K.gguf');
const REF = JSON.parse(readFileSync(new URL('../../../tests/data/embed-stories260K-mean.json', import.meta.url), 'utf8'));

const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; ++i) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};
const norm = (a) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));

const model = await llm.loadModel(MODEL, { threads: 2 });

test('embed(texts) equals llama-embedding (mean pooling) as unit Float32Arrays in order', async () => {
  const out = await model.embed(REF.texts, { pooling: 'mean' });
  assert.equal(out.length, REF.texts.length);
  out.forEach((v, i) => {
    assert.ok(v instanceof Float32Array);
    assert.equal(v.length, model.describe().config.nEmbd);
    assert.ok(cosine(v, REF.embeddings[i]) >= 1 - 1e-4, `text ${i}: cosine ${cosine(v, REF.embeddings[i])}`);
    assert.ok(Math.abs(norm(v) - 1) < 1e-5);
  });
  const [one] = await model.embed(REF.texts[1], { pooling: 'mean', batchSize: 3 });
  assert.ok(cosine(one, out[1]) > 1 - 1e-6, 'a single string, split over passes: the same vector');
});

test('embed options: normalize false, pooling none rows, last, and errors', async () => {
  const [raw] = await model.embed(REF.texts[0], { pooling: 'mean', normalize: false });
  assert.ok(Math.abs(norm(raw) - 1) > 1e-3);
  const nTok = REF.tokens[0].length, d = model.describe().config.nEmbd;
  const [rows] = await model.embed(REF.texts[0], { pooling: 'none', normalize: false });
  assert.equal(rows.length, nTok * d);
  const [last] = await model.embed(REF.texts[0], { pooling: 'last', normalize: false });
  assert.deepEqual(Array.from(last), Array.from(rows.subarray((nTok - 1) * d)));
  await assert.rejects(model.embed(['a'], { pooling: 'rank' }), /pooling: unknown pooling 'rank'/);
  await assert.rejects(model.embed([1]), /texts\[0\]/);
  await assert.rejects(model.embed(['a'], { batchSize: 0 }), /batchSize/);
});
