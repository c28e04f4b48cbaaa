#!/usr/bin/env python3
"""edgellm-server --embeddings: POST /v1/embeddings (OpenAI's shape) and /embedding (llama-server's).
The vectors of stories260K (mean pooling) equal llama.cpp's llama-embedding (tests/data reference,
cosine >= 1 - 1e-4); a string, an array of strings and token arrays give the same vectors; base64
decodes to the floats; usage counts the tokens; embd_normalize -1 leaves them unnormalised;
/embedding answers [{"index", "embedding": [[...]]}]; --pooling none serves /embedding one row per
token and refuses /v1/embeddings; bad inputs get 400 naming the parameter; a server without
--embeddings answers 501.
usage: embeddings.py SERVER MODEL REFERENCE.json   (exit 77 = skipped)"""
import base64
import json
import math
import os
import struct
import sys
import urllib.error
import urllib.request

from server_util import fail, ok, start_server

SKIP = 77


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def close(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def main():
    server, model, ref_path = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    with open(ref_path) as f:
        ref = json.load(f)
    texts = ref["texts"]
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--embeddings", "--pooling", "mean"])
    try:
        st, r = post(port, "/v1/embeddings", {"input": texts, "model": "any"})
        ok(st == 200 and r["object"] == "list" and [d["index"] for d in r["data"]] == list(range(len(texts))),
           "/v1/embeddings: a list with one item per input, in order")
        vecs = [d["embedding"] for d in r["data"]]
        for i, (v, want) in enumerate(zip(vecs, ref["embeddings"])):
            ok(cosine(v, want) >= 1 - 1e-4, f"input {i}: llama-embedding's vector (cosine {cosine(v, want):.7f})")
            ok(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5, f"input {i}: unit norm")
        n_tok = sum(len(t) for t in ref["tokens"])
        ok(r["usage"]["prompt_tokens"] == n_tok and r["usage"]["total_tokens"] == n_tok, f"usage: {n_tok} prompt tokens")
        st, one = post(port, "/v1/embeddings", {"input": texts[0]})
        ok(st == 200 and close(one["data"][0]["embedding"], vecs[0]), "a string input: the same vector as in an array")
        st, toks = post(port, "/v1/embeddings", {"input": ref["tokens"]})
        ok(st == 200 and all(close(d["embedding"], v) for d, v in zip(toks["data"], vecs)), "token arrays: the same vectors")
        st, single = post(port, "/v1/embeddings", {"input": ref["tokens"][1]})
        ok(st == 200 and close(single["data"][0]["embedding"], vecs[1]), "one token array: the same vector")
        st, b64 = post(port, "/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
        raw = base64.b64decode(b64["data"][0]["embedding"])
        floats = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        ok(st == 200 and close(floats, vecs[0], 1e-7), "encoding_format base64: little-endian float32 of the vector")
        st, raw_norm = post(port, "/v1/embeddings", {"input": texts[0], "embd_normalize": -1})
        n = math.sqrt(sum(x * x for x in raw_norm["data"][0]["embedding"]))
        ok(st == 200 and abs(n - 1) > 1e-3 and cosine(raw_norm["data"][0]["embedding"], vecs[0]) > 1 - 1e-6,
           "embd_normalize -1: the same direction, not normalised")
        st, ll = post(port, "/embedding", {"content": texts[0]})
        ok(st == 200 and isinstance(ll, list) and ll[0]["index"] == 0 and close(ll[0]["embedding"][0], vecs[0]),
           "/embedding: [{index, embedding: [[row]]}]")
        for body, param in [({}, "input"), ({"input": []}, "input"), ({"input": 5}, "input"),
                            ({"input": [[1, 2], {"a": 1}]}, "input"), ({"input": [[1, 99999]]}, "input"),
                            ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
                            ({"input": "x", "embd_normalize": 1}, "embd_normalize")]:
            st, e = post(port, "/v1/embeddings", body)
            ok(st == 400 and e["error"]["param"] == param, f"{json.dumps(body)}: 400 naming {param}")
    finally:
        stop(proc)

    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--embeddings", "--pooling", "none"])
    try:
        st, ll = post(port, "/embedding", {"content": texts[0]})
        rows = ll[0]["embedding"] if st == 200 else []
        ok(len(rows) == len(ref["tokens"][0]), "--pooling none: /embedding gives one row per token")
        mean = [sum(r[j] for r in rows) / len(rows) for j in range(len(rows[0]))]
        ok(cosine(mean, vecs[0]) > 1 - 1e-5, "--pooling none: the rows' mean is the mean-pooled vector")
        st, e = post(port, "/v1/embeddings", {"input": texts[0]})
        ok(st == 400 and "pooling 'none'" in e["error"]["message"], "--pooling none: /v1/embeddings refused (400)")
    finally:
        stop(proc)

    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1"])
    try:
        st, e = post(port, "/v1/embeddings", {"input": "x"})
        ok(st == 501 and "--embeddings" in e["error"]["message"], "without --embeddings: 501 naming the flag")
    finally:
        stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
