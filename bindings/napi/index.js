// The package's entry on Node: the native module built by `npm install` (build/edgellm.node, or
// EDGELLM_NAPI_MODULE), plus session.stream(), the async-iterator form of generate().
'use strict';
const path = require('node:path');

const native = require(process.env.EDGELLM_NAPI_MODULE || path.join(__dirname, 'build', 'edgellm.node'));

// for await (const piece of session.stream(prompt, options)) ...: the pieces generate() would pass
// to onToken. Leaving the loop early (break, return, a throw) cancels the generation; the result
// (stop reason, timings) is the iterator's return value, and also `iterator.result` (a promise).
function stream(prompt, options) {
  const queue = [];
  let wake = null;
  let finished = false;
  let failure = null;
  const notify = () => {
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  };
  const result = this.generate(prompt, options || {}, (piece) => {
    queue.push(piece);
    notify();
  }).then((r) => {
    finished = true;
    notify();
    return r;
  }, (e) => {
    failure = e;
    finished = true;
    notify();
    throw e;
  });
  result.catch(() => {});  // reported through next()
  const session = this;
  return {
    result,
    async next() {
      for (;;) {
        if (queue.length) return { value: queue.shift(), done: false };
        if (failure) throw failure;
        if (finished) return { value: await result, done: true };
        await new Promise((resolve) => { wake = resolve; });
      }
    },
    async return(value) {
      if (!finished) session.cancel();
      try {
        await result;
      } catch (e) {
        // cancelled: the caller left the loop
      }
      return { value, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

Object.defineProperty(native.Session.prototype, 'stream', { value: stream, writable: true, configurable: true });
module.exports = native;
