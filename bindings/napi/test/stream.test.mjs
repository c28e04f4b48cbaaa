// The package's index.js on stories260K: session.stream() yields the pieces of generate()
// (concatenated: the same greedy text), its result settles with the stop reason, and leaving the
// loop early cancels the generation (the session is free for the next call). Run by ctest through run.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const llm = createRequire(import.meta.url)('../index.js');  // EDGELLM_NAPI_MODULE: the module built here
const MODEL = join(process.env.EDGELLM_SHARED_DATA, 'models', 'stories260K.gguf');
const greedy = { maxTokens: 32, temperature: 0 };
const model = await llm.loadModel(MODEL, { threads: 2 });

test('session.stream() yields the text generate() returns', async () => {
  const want = (await model.createSession().generate('Once upon a time', greedy)).text;
  const it = model.createSession().stream('Once upon a time', greedy);
  let text = '';
  let n = 0;
  for await (const piece of it) {
    text += piece;
    ++n;
  }
  assert.equal(text, want);
  assert.ok(n > 1, 'several pieces');
  assert.equal((await it.result).text, want);
});

test('leaving the loop early cancels the generation', async () => {
  const s = model.createSession();
  const it = s.stream('Once upon a time', { maxTokens: 500, temperature: 0 });
  let n = 0;
  for await (const piece of it) {
    assert.equal(typeof piece, 'string');
    if (++n === 3) break;
  }
  const r = await it.result;
  assert.equal(r.stopReason, 'cancelled');
  assert.ok(r.tokens.length < 500);
  assert.ok((await s.generate('The dog', { maxTokens: 4, temperature: 0 })).text.length > 0, 'the session serves the next call');
});

test('a failing generation rejects the loop', async () => {
  const s = model.createSession({ ctx: 8 });
  await assert.rejects(async () => {
    for await (const piece of s.stream('Once upon a time there was a little girl who liked to play', greedy)) void piece;
  });
});
