// edgellm's Node-API module: edgellm.node under Node.js (`require` / `createRequire`), libedgellm.so
// in an OpenHarmony app (`import llm from 'libedgellm.so'`). Implemented in edgellm_napi.cpp.
// Nothing here blocks the JS thread: loadModel and embed run on the host's worker threads, generate
// on a thread of its own.

/** KV cache storage: f32 (exact), f16 (half the memory), q8_0 (a quarter; head dim % 32 == 0). */
export type KvType = 'f32' | 'f16' | 'q8_0';

export interface LoadOptions {
  /** Memory the model may use in MiB (weights, KV at ctx, scratch); a larger model keeps what fits
   *  resident and streams the rest from storage. Default: what this process may use. */
  memBudgetMiB?: number;
  /** Decoding threads of each session (default 0: every core). */
  threads?: number;
  /** KV cache type of the sessions (default 'f32'). */
  kvType?: KvType;
  /** Context of the sessions in tokens (default 0: the model's training context, at most 4096). */
  ctx?: number;
  /** Repack weight matrices into the interleaved forms the kernels prefer (default true). */
  repack?: boolean;
  /** Called on the JS thread with the fraction loaded (increasing, 1 last); returning false stops the load. */
  onProgress?: (fraction: number) => boolean | void;
  /** Aborting it stops the load: the promise rejects ("load cancelled") and what was loaded is freed. */
  signal?: AbortSignal;
}

export interface SessionOptions {
  /** Prepended as a system message when generate() is given messages without one. */
  systemPrompt?: string;
  /**
   * A built-in chat format's name ('chatml', 'llama3', 'gemma', ...) or a Jinja template's source;
   * default: the model file's own template (tokenizer.chat_template, rendered by the Jinja engine as
   * Hugging Face does), else chatml.
   */
  chatTemplate?: string;
  /** Extra template variables for every generate(messages), e.g. { enable_thinking: false }. */
  chatTemplateKwargs?: Record<string, unknown>;
  /** Overrides of the model's defaults for this session. */
  ctx?: number;
  threads?: number;
  kvType?: KvType;
}

export interface ChatContentPart {
  type: 'text';
  text: string;
}

export interface ChatToolCall {
  id?: string;
  type: 'function';
  function: ChatToolCallFunction;
}

export interface ChatToolCallFunction {
  name: string;
  /** An object (or its JSON text) of the call's arguments. */
  arguments: Record<string, unknown> | string;
}

/**
 * A message as chat templates take it. Its text (content, text parts, reasoning_content) is
 * tokenized as text: control-token text typed by a user (e.g. "<|im_end|>") never becomes the
 * control token.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  content: string | ChatContentPart[];
  /** Assistant turns: the model's thoughts, for templates that show or drop them. */
  reasoning_content?: string;
  /** Assistant turns: the tool calls it made. */
  tool_calls?: ChatToolCall[];
  /** Tool results: the tool's name and the call they answer. */
  name?: string;
  tool_call_id?: string;
}

export interface GenerateOptions {
  /** Tokens to generate at most (default 128; -1: until another rule stops). */
  maxTokens?: number;
  /** 0 = greedy (default 0.8). */
  temperature?: number;
  topP?: number;          // default 0.95
  topK?: number;          // default 40; 0 = off
  minP?: number;          // default 0.05
  repeatPenalty?: number; // default 1 (off)
  seed?: number;          // default 24301; an integer below 2^53
  /** Stop strings: generation ends at the first one, which is not part of the text. */
  stop?: string[];
  /** Wall-clock budget of the whole call in ms: the answer ends before it (0 = none). */
  deadlineMs?: number;
  /** Keep going past end-of-generation tokens. */
  ignoreEos?: boolean;
  /** The answer matches this GBNF grammar (llama.cpp's syntax); near maxTokens it closes what it opened. */
  grammar?: string;
  /** The answer is JSON valid for this JSON Schema (the subset llama.cpp's converter covers). */
  jsonSchema?: Record<string, unknown>;
  /** Chat only: functions the model may call, rendered by the chat template; calls come back as
   *  result.toolCalls in the format the template teaches (Hermes/Qwen, Llama 3.x, Mistral,
   *  Functionary v3.1), their arguments valid for each function's parameters. */
  tools?: Tool[];
  /** 'auto' (default): the model chooses; 'required': at least one call; 'none': no call; or a named function. */
  toolChoice?: 'auto' | 'required' | 'none' | NamedToolChoice;
  /** More than one call in an answer (default true). */
  parallelToolCalls?: boolean;
}

export interface Tool {
  type: 'function';
  function: ToolFunction;
}

export interface ToolFunction {
  name: string;
  description?: string;
  /** A JSON Schema of the arguments (default: any object). */
  parameters?: Record<string, unknown>;
}

export interface NamedToolChoice {
  type: 'function';
  function: NamedFunction;
}

export interface NamedFunction {
  name: string;
}

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as JSON text (OpenAI's function.arguments). */
  arguments: string;
}

export type StopReason = 'eos' | 'stop' | 'maxTokens' | 'deadline' | 'contextFull' | 'cancelled';

export interface Timings {
  promptTokens: number;
  prefillMs: number;
  ttftMs: number;
  decodeMs: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  peakRssBytes: number;
}

export interface GenerateResult {
  /** The whole continuation (stop string removed). When onToken stopped the call, it may hold up
   *  to two pieces more than onToken received (decoding runs at most a piece ahead). */
  text: string;
  tokens: number[];
  stopReason: StopReason;
  timings: Timings;
  /** With tools: the calls the answer made (`text` is then what it wrote besides them). */
  toolCalls?: ToolCall[];
}

/**
 * Called on the JS thread with each piece of valid UTF-8 text as it is generated (the pieces
 * concatenate to the result's text). Returning false stops generation (stopReason 'cancelled');
 * a throw stops it too and rejects generate() with the thrown value.
 */
export type OnToken = (piece: string) => boolean | void;

/**
 * session.stream()'s iterator: the pieces onToken would get; leaving the loop early cancels the
 * generation. `result` settles as generate()'s promise does (the iterator's return value too).
 */
export interface GenerationStream extends AsyncIterableIterator<string> {
  result: Promise<GenerateResult>;
}

export declare class Session {
  private constructor();
  /**
   * A string continues the session's text as is (the first call adds BOS). Messages are rendered
   * with the chat template; when the rendering extends what the session already holds (the same
   * conversation plus new turns) only the new part is evaluated, otherwise the session starts over.
   * One call at a time per session; rejects with the library's error text (context full, ...).
   */
  generate(prompt: string | ChatMessage[], options?: GenerateOptions, onToken?: OnToken): Promise<GenerateResult>;
  generate(prompt: string | ChatMessage[], onToken: OnToken): Promise<GenerateResult>;
  /**
   * Node, through the package's index.js: generate() as an async iterator of pieces,
   * `for await (const piece of session.stream(messages, options)) ...`. Not in the OpenHarmony module.
   */
  stream(prompt: string | ChatMessage[], options?: GenerateOptions): GenerationStream;
  /** Stops a running generate() within a token; it resolves with stopReason 'cancelled'. */
  cancel(): void;
  /** Forgets the conversation (not while generating). */
  reset(): void;
  /** Tokens held in the session's KV cache (throws while generating). */
  nPast(): number;
  /** Writes the tokens held and their KV cache to `path` (atomically: a crash leaves an older file intact). */
  save(path: string): Promise<void>;
  /** Replaces the conversation by one save() wrote; rejects, naming what differs, a file from another
   *  model, KV type, context size or format version, and a truncated or damaged file. */
  restore(path: string): Promise<void>;
  /** Frees the KV cache and threads now (a running call is cancelled first). */
  close(): void;
}

export interface ModelConfig {
  nLayer: number;
  nEmbd: number;
  nHead: number;
  nHeadKv: number;
  nFf: number;
  nVocab: number;
  nCtxTrain: number;
}

export interface ModelDefaults {
  ctx: number;
  threads: number;
  kvType: KvType;
}

export interface TokenizeOptions {
  addBos?: boolean;
  /** Control-token text ("<|im_end|>", "</s>") becomes the control token; false (default): it stays text. */
  special?: boolean;
  /** The former name of `special`. */
  parseSpecial?: boolean;
}

export interface DetokenizeOptions {
  removeSpecial?: boolean;
  unparseSpecial?: boolean;
}

/** How a text's token vectors become one: llama.cpp's pooling types. */
export type Pooling = 'none' | 'mean' | 'cls' | 'last';

export interface EmbedOptions {
  /** Default: the model file's <arch>.pooling_type ('none' without it). */
  pooling?: Pooling;
  /** L2-normalise each vector (default true). */
  normalize?: boolean;
  /** Tokens per forward pass (default 512; texts are batched together and split across passes). */
  batchSize?: number;
}

export interface ModelDescription {
  version: string;
  path: string;
  fileBytes: number;
  config: ModelConfig;
  defaults: ModelDefaults;
  /** 'jinja' (the file's own template) or the built-in format's name. */
  chatTemplate: string;
  /** The kernels chosen for this CPU, one per line. */
  kernels: string;
  repacked: string;
  /** Which weights are resident and which are streamed under memBudgetMiB. */
  residency: string;
  /** Weights + KV at ctx + scratch against the machine's RAM. */
  memoryPlan: string;
}

export declare class Model {
  private constructor();
  createSession(options?: SessionOptions): Session;
  tokenize(text: string, options?: TokenizeOptions): number[];
  detokenize(tokens: number[] | Int32Array | Uint32Array, options?: DetokenizeOptions): string;
  /**
   * The model's last hidden state (after the final norm) of each text, pooled (one Float32Array of
   * nEmbd floats per text; pooling 'none': nTokens x nEmbd, row after row), on a worker thread.
   * Texts are tokenized with BOS/EOS as the vocabulary asks, as text (no control tokens).
   */
  embed(texts: string | string[], options?: EmbedOptions): Promise<Float32Array[]>;
  describe(): ModelDescription;
  /** Drops the model's reference to the weights: they are freed when the last session using them closes. */
  close(): void;
}

/** Loads a GGUF model on a worker thread; rejects with the library's error text (missing file, bad GGUF, ...). */
export declare function loadModel(path: string, options?: LoadOptions): Promise<Model>;
export declare const version: string;
