#!/usr/bin/env python3
"""Writes tests/data/embed-<model>-<pooling>.json: llama.cpp's llama-embedding vectors of a few
texts (test_embedding.cpp, tests/server/embeddings.py and bindings/napi/test/embed.test.mjs compare
edgellm's with them). usage: make_embed_refs.py LLAMA_EMBEDDING SHARED_DATA OUT_DIR
LLAMA_EMBEDDING: llama.cpp's tools/llama-embedding (built with -DGGML_NATIVE=ON, Release)."""
import json
import os
import re
import subprocess
import sys

CASES = [
    ("models/stories260K.gguf", "mean",
     ["Once upon a time", "Lily and Tom went to the park to play with a big red ball.", "The little dog was happy."]),
    ("qwen/models/tiny-qwen3-256-f32.gguf", "last",
     ["Hello world", "What is the capital of France? Paris, 42 km/h.", "embeddings for search"]),
]


def main():
    exe, data, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    for rel, pooling, texts in CASES:
        cmd = [exe, "-m", os.path.join(data, rel), "-p", "\n".join(texts), "--pooling", pooling, "--embd-normalize", "2",
               "--embd-output-format", "json", "-t", "1", "-ctk", "f32", "-ctv", "f32", "-fa", "off", "--verbose-prompt"]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, text=True).stdout
        start = out.index("\n{") + 1  # --verbose-prompt's token lines, then the JSON
        tokens = []
        for block in out[:start].strip().split("\n\n\n"):
            tokens.append([int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> ", block, re.M)])
        vecs = [d["embedding"] for d in json.loads(out[start:])["data"]]
        assert len(tokens) == len(texts) == len(vecs), (len(tokens), len(vecs))
        ref = {"model": rel, "pooling": pooling, "normalize": True,
               "made_by": "llama.cpp llama-embedding (v0.5.0 de3ff81): " + " ".join(["llama-embedding", "-m", rel, "-p", "<texts joined by newlines>"] + cmd[5:]),
               "texts": texts, "tokens": tokens, "embeddings": vecs}
        name = os.path.splitext(os.path.basename(rel))[0]
        with open(os.path.join(out_dir, f"embed-{name}-{pooling}.json"), "w") as f:
            json.dump(ref, f, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
