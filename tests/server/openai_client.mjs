// edgellm-server driven by the official `openai` npm client (issue 24): non-streamed and streamed
// chat and completions on stories260K greedy equal edgellm-cli's text; two (and four) clients at
// once get the texts they get one at a time; an aborted stream frees its slot; API key, 400s and
// 404s come back as OpenAI error objects and the server keeps serving; client.embeddings.create
// (base64 by the client's default, and float) gives llama-embedding's vectors (tests/data).
// usage: node openai_client.mjs SERVER CLI MODEL NPM_DIR   (exit 77 = skipped)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const [server, cli, model, npmDir] = process.argv.slice(2);
const SKIP = 77;
function skip(why) { console.log(`skipped: ${why}`); process.exit(SKIP); }
function fail(why) { console.error(`FAIL: ${why}`); process.exitCode = 1; throw new Error(why); }
function eq(got, want, what) {
  if (got !== want) fail(`${what}:\n  got  ${JSON.stringify(got)}\n  want ${JSON.stringify(want)}`);
  console.log(`ok: ${what}`);
}
function ok(cond, what) { if (!cond) fail(what); console.log(`ok: ${what}`); }

if (!server || !cli || !model || !npmDir) fail('usage: node openai_client.mjs SERVER CLI MODEL NPM_DIR');
if (!existsSync(model)) skip(`${model} not found`);

// The client, from the npm registry into the build folder (once).
mkdirSync(npmDir, { recursive: true });
if (!existsSync(path.join(npmDir, 'node_modules', 'openai', 'package.json'))) {
  const r = spawnSync('npm', ['install', '--prefix', npmDir, '--no-audit', '--no-fund', '--loglevel=error', 'openai@4'],
                      { encoding: 'utf8', timeout: 180000 });
  if (r.error || r.status !== 0) skip(`npm install openai failed (no npm or no registry): ${r.error ?? r.stderr.trim().split('\n').pop()}`);
}
const require = createRequire(path.join(npmDir, 'package.json'));
const OpenAI = require('openai');

// What edgellm-cli prints (the continuation and a newline) for the same request.
function cliText(args) {
  const r = spawnSync(cli, ['-m', model, '--temp', '0', '-t', '1', ...args], { encoding: 'utf8' });
  if (r.status !== 0) fail(`edgellm-cli ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.replace(/\n$/, '');
}

const KEY = 'test-key-0123456789';
const PARALLEL = 2;
const proc = spawn(server, ['-m', model, '--port', '0', '-t', '1', '--parallel', String(PARALLEL), '-c', '2048',
                            '--api-key', KEY, '--embeddings', '--pooling', 'mean'], { stdio: ['ignore', 'inherit', 'pipe'] });
let stderr = '';
const port = await new Promise((resolve, reject) => {
  proc.stderr.on('data', (d) => {
    stderr += d;
    process.stderr.write(d);
    const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
    if (m) resolve(Number(m[1]));
  });
  proc.on('exit', (code) => reject(new Error(`edgellm-server exited with ${code}: ${stderr}`)));
});
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0 });
const health = async () => (await fetch(`${base}/health`)).json();

try {
  const models = await client.models.list();
  eq(models.data[0].id, path.basename(model), 'GET /v1/models lists the model file');

  // Completions and chat, not streamed, equal edgellm-cli greedy.
  const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park', 'One day, a bird'];
  const want = prompts.map((p) => cliText(['-p', p, '-n', '48']));
  const complete = async (p) => (await client.completions.create({ model: path.basename(model), prompt: p, max_tokens: 48, temperature: 0 })).choices[0].text;
  for (let i = 0; i < prompts.length; ++i) eq(await complete(prompts[i]), want[i], `completion "${prompts[i]}" equals edgellm-cli`);

  const chatWant = cliText(['--chat', '-p', 'Hi, who are you?', '-n', '40']);
  const messages = [{ role: 'user', content: 'Hi, who are you?' }];
  // SDKs and apps send OpenAI's model names: the loaded model serves them, and the answer names it.
  const chat = await client.chat.completions.create({ model: 'gpt-4o-mini', messages, max_tokens: 40, temperature: 0 });
  eq(chat.choices[0].message.content, chatWant, 'chat completion (model "gpt-4o-mini") equals edgellm-cli --chat');
  eq(chat.model, path.basename(model), 'the answer names the loaded model');
  eq(chat.choices[0].finish_reason, 'length', 'finish_reason length at max_tokens');
  ok(chat.usage.completion_tokens === 40 && chat.usage.prompt_tokens > 0, 'usage counts the tokens');
  ok(chat.timings && chat.timings.predicted_n === 40 && chat.timings.predicted_per_second > 0, 'timings object');

  // Streamed: the deltas add up to the same text; usage on request.
  const stream = await client.chat.completions.create({ model: path.basename(model), messages, max_tokens: 40, temperature: 0,
                                                        stream: true, stream_options: { include_usage: true } });
  let streamed = '', chunks = 0, finish = null, usage = null;
  for await (const c of stream) {
    ++chunks;
    streamed += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
    usage = c.usage ?? usage;
  }
  eq(streamed, chatWant, 'streamed chat equals edgellm-cli --chat');
  ok(chunks > 3 && finish === 'length' && usage?.completion_tokens === 40, `streamed in ${chunks} chunks, finish_reason and usage`);
  const cstream = await client.completions.create({ prompt: prompts[0], max_tokens: 48, temperature: 0, stream: true });
  let ctext = '';
  for await (const c of cstream) ctext += c.choices[0]?.text ?? '';
  eq(ctext, want[0], 'streamed completion equals edgellm-cli');

  // Concurrent: two clients at once, then four (two wait in the queue), get the sequential texts.
  const two = await Promise.all(prompts.slice(0, 2).map(complete));
  eq(JSON.stringify(two), JSON.stringify(want.slice(0, 2)), 'two clients at once get the texts of one at a time');
  const four = await Promise.all(prompts.map(complete));
  eq(JSON.stringify(four), JSON.stringify(want), 'four clients at once (two queued) get the texts of one at a time');
  // Batching: 48 tokens take this model about 2 ms, so short requests sent together need not
  // overlap on a loaded machine; PARALLEL requests of 1500 tokens each (about 60 ms) do. A round
  // that did not overlap (the scheduler's timing, not a fault) is repeated, at most 3 rounds.
  const LONG = 1500;
  let batched = null;
  for (let round = 0; round < 3 && !batched; ++round) {
    const before = (await health()).decode_steps;
    const long = await Promise.all(prompts.slice(0, PARALLEL).map((prompt) =>
      client.completions.create({ prompt, max_tokens: LONG, temperature: 0, ignore_eos: true })));
    ok(long.every((r) => r.usage.completion_tokens === LONG), `${PARALLEL} requests of ${LONG} tokens at once`);
    const h = await health();
    if (h.max_step_tokens === PARALLEL && h.decode_steps - before < PARALLEL * LONG) batched = { h, steps: h.decode_steps - before };
  }
  ok(batched !== null, `decode steps carried ${PARALLEL} sequences (one forward pass for ${PARALLEL} requests)`);
  console.log(`ok: ${PARALLEL} x ${LONG} tokens took ${batched.steps} decode steps`);

  // A common system prompt is evaluated once: the second conversation reuses its tokens (cache_n).
  const system = { role: 'system', content: 'You tell short stories about animals who live in the forest and like to play.' };
  const c1 = await client.chat.completions.create({ messages: [system, { role: 'user', content: 'A fox' }], max_tokens: 8, temperature: 0 });
  const c2 = await client.chat.completions.create({ messages: [system, { role: 'user', content: 'A bear' }], max_tokens: 8, temperature: 0 });
  ok(c2.timings.cache_n >= 20 && c2.timings.prompt_n < c1.timings.prompt_n,
     `the shared system prompt is reused: ${c2.timings.cache_n} tokens from the cache, ${c2.timings.prompt_n} evaluated (first: ${c1.timings.prompt_n})`);

  // Abort mid-stream: the generation is cancelled and its slot freed.
  const cancelledBefore = (await health()).requests_cancelled;
  const long = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 2000, temperature: 0, stream: true,
                                                 ignore_eos: true });
  let got = 0;
  for await (const c of long) {
    if (++got === 3) { long.controller.abort(); break; }
  }
  let after = await health();
  for (let i = 0; i < 50 && (after.slots_idle !== PARALLEL || after.requests_cancelled === cancelledBefore); ++i) {
    await new Promise((r) => setTimeout(r, 100));
    after = await health();
  }
  ok(after.requests_cancelled === cancelledBefore + 1, 'the aborted stream was cancelled (not run to max_tokens)');
  ok(after.slots_idle === PARALLEL && after.slots_processing === 0, 'its slot is free again');
  eq(await complete(prompts[1]), want[1], 'the server serves the next request as before');

  // Embeddings: the client asks for base64 by default and decodes it; float on request.
  const ref = JSON.parse(readFileSync(new URL('../data/embed-stories260K-mean.json', import.meta.url), 'utf8'));
  const cosine = (a, b) => {
    let ab = 0, aa = 0, bb = 0;
    for (let i = 0; i < a.length; ++i) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
    return ab / Math.sqrt(aa * bb);
  };
  for (const encoding_format of [undefined, 'float']) {
    const emb = await client.embeddings.create({ model: path.basename(model), input: ref.texts, ...(encoding_format ? { encoding_format } : {}) });
    ok(emb.data.length === ref.texts.length && emb.data.every((d, i) => d.index === i &&
       cosine(d.embedding, ref.embeddings[i]) >= 1 - 1e-4), `embeddings.create (${encoding_format ?? 'client default'}): llama-embedding's vectors`);
    eq(emb.usage.prompt_tokens, ref.tokens.reduce((n, t) => n + t.length, 0), 'embeddings usage: the prompt tokens');
  }

  // Errors: OpenAI error objects, and the server goes on.
  const status = async (fn) => { try { await fn(); return 200; } catch (e) { return e.status; } };
  const noKey = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong-key-000000', maxRetries: 0 });
  eq(await status(() => noKey.models.list()), 401, 'wrong API key: 401');
  eq((await fetch(`${base}/health`)).status, 200, '/health needs no key');
  eq(await status(() => client.completions.create({ prompt: 'x', temperature: -1 })), 400, 'temperature -1: 400');
  eq(await status(() => client.completions.create({ prompt: 'x', model: 'gpt-4o', max_tokens: 2 })), 200, 'another model name: served by the loaded model');
  eq(await status(() => client.chat.completions.create({ messages, max_tokens: 2, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] })),
     400, 'tools with the built-in chatml format: 400 (they need a Jinja template)');
  const jo = await client.chat.completions.create({ messages, max_tokens: 200, seed: 4, response_format: { type: 'json_object' } });
  ok(typeof JSON.parse(jo.choices[0].message.content) === 'object', 'response_format json_object: an object');
  eq(await status(() => client.completions.create({ prompt: 'x', max_tokens: 100000 })), 400, 'max_tokens beyond the context: 400');
  eq(await status(() => client.chat.completions.create({ messages: [{ role: 'wizard', content: 'x' }] })), 400, 'unknown role: 400');
  const raw = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: '{"messages": [', headers: { Authorization: `Bearer ${KEY}` } });
  const rawBody = await raw.json();
  ok(raw.status === 400 && rawBody.error.type === 'invalid_request_error', 'malformed JSON: 400 with an OpenAI error object');
  eq((await fetch(`${base}/v1/nothing`, { headers: { Authorization: `Bearer ${KEY}` } })).status, 404, 'unknown endpoint: 404');
  eq(await complete(prompts[2]), want[2], 'still serving after the errors');
} finally {
  proc.kill('SIGTERM');
}
const code = await new Promise((resolve) => proc.on('exit', (c) => resolve(c)));
if (process.exitCode !== 1) eq(code, 0, 'SIGTERM stops the server cleanly');

// Tool calls through the client, stories260K under the Qwen2.5 and the Llama 3.1 templates: two
// tools, tool_choice "required" -> a tool_calls answer whose arguments hold the schema (checked
// here by hand: required members, the enum, the time pattern); the same call streamed; the tool's
// result sent back gets a plain answer.
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'set_alarm', description: 'Sets an alarm', parameters: {
    type: 'object', properties: { time: { type: 'string', pattern: '^[0-2][0-9]:[0-5][0-9]$' } },
    required: ['time'], additionalProperties: false } } },
];
function argsValid(name, json) {
  const a = JSON.parse(json);
  if (name === 'get_weather') return Object.keys(a).length === 2 && typeof a.city === 'string' && a.city.length <= 20 &&
                                     ['celsius', 'fahrenheit'].includes(a.unit);
  if (name === 'set_alarm') return Object.keys(a).length === 1 && /^[0-2][0-9]:[0-5][0-9]$/.test(a.time);
  return false;
}
const templates = path.join(path.dirname(path.dirname(model)), 'templates');
for (const tmpl of ['Qwen-Qwen2.5-7B-Instruct.jinja', 'meta-llama-Llama-3.1-8B-Instruct.jinja']) {
  const file = path.join(templates, tmpl);
  if (!existsSync(file)) { console.log(`skipped: ${file} not found`); continue; }
  const p = spawn(server, ['-m', model, '--port', '0', '-t', '1', '--chat-template-file', file], { stdio: ['ignore', 'inherit', 'pipe'] });
  let err = '';
  const tport = await new Promise((resolve, reject) => {
    p.stderr.on('data', (d) => {
      err += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m) resolve(Number(m[1]));
    });
    p.on('exit', (c) => reject(new Error(`edgellm-server exited with ${c}: ${err}`)));
  });
  try {
    const tc = new OpenAI({ baseURL: `http://127.0.0.1:${tport}/v1`, apiKey: 'none', maxRetries: 0 });
    const msgs = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const req = { messages: msgs, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed: 7, max_tokens: 300 };
    const r = await tc.chat.completions.create(req);
    const call = r.choices[0].message.tool_calls?.[0];
    ok(r.choices[0].finish_reason === 'tool_calls' && call && argsValid(call.function.name, call.function.arguments),
       `${tmpl}: tool_calls ${call?.function.name}(${call?.function.arguments}) with valid arguments`);
    let name = '', args = '', finish = null;
    for await (const chunk of await tc.chat.completions.create({ ...req, stream: true })) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += d.function?.name ?? '';
        args += d.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    ok(finish === 'tool_calls' && name === call.function.name && args === call.function.arguments, `${tmpl}: the streamed call is the same`);
    const back = await tc.chat.completions.create({ messages: [...msgs, r.choices[0].message,
      { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }], tools: TOOLS, temperature: 0, max_tokens: 24 });
    ok(typeof back.choices[0].message.content === 'string' && !back.choices[0].message.tool_calls,
       `${tmpl}: the tool result gets a plain answer (${JSON.stringify(back.choices[0].message.content.slice(0, 40))})`);
  } finally {
    p.kill('SIGTERM');
  }
  await new Promise((resolve) => p.on('exit', resolve));
}
