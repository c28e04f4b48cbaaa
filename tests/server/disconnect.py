#!/usr/bin/env python3
"""edgellm-server: a client that closes its connection cancels its generation within a token or
two, streamed or not (the scheduler probes the socket before each token); keep-alive requests, and
a next request sent on the connection while the previous one generates, are not mistaken for a close; a long prompt arriving while a stream runs
does not stall it (the stream goes on receiving tokens while the prompt is read a chunk per step).
usage: disconnect.py SERVER MODEL   (exit 77 = skipped)"""
import json
import os
import socket
import sys
import time

from server_util import fail, ok, start_server

SKIP = 77


def main():
    server, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    parallel = 2
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--parallel", str(parallel), "-c", "2048",
                               "--prefill-chunk", "16"])
    try:
        return run(port, parallel)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def request_bytes(path, body, keep_alive=False):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n").encode() + data


def read_response(f):
    """One HTTP/1.1 response (Content-Length or chunked) from a buffered socket file: (status, body)."""
    status = int(f.readline().split()[1])
    headers = {}
    while True:
        line = f.readline().decode().strip()
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            n = int(f.readline().strip(), 16)
            if n == 0:
                f.readline()
                break
            body += f.read(n)
            f.readline()
        return status, body
    return status, f.read(int(headers.get("content-length", "0")))


def get_json(port, path):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        f = s.makefile("rb")
        status, body = read_response(f)
    return json.loads(body)


def post(port, body):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request_bytes("/v1/completions", body))
        status, data = read_response(s.makefile("rb"))
    return status, json.loads(data)


def wait_cancelled(port, cancelled_before, parallel, t_close, limit_s):
    """Polls /health until the cancel is counted and every slot is idle; returns (seconds, health)."""
    while True:
        h = get_json(port, "/health")
        if h["requests_cancelled"] > cancelled_before and h["slots_idle"] == parallel:
            return time.monotonic() - t_close, h
        if time.monotonic() - t_close > limit_s:
            return None, h
        time.sleep(0.002)


def run(port, parallel):
    n_long = 1900
    long_req = {"prompt": "Once upon a time", "max_tokens": n_long, "temperature": 0, "ignore_eos": True}

    # The reference: the whole generation, run to max_tokens.
    t0 = time.monotonic()
    status, full = post(port, long_req)
    t_full = time.monotonic() - t0
    ok(status == 200 and full["usage"]["completion_tokens"] == n_long,
       f"a non-streamed request runs to max_tokens={n_long} in {t_full * 1000:.0f} ms")

    # Non-streamed: the client sends the request and closes its socket 100 ms later.
    h0 = get_json(port, "/health")
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request_bytes("/v1/completions", long_req))
    time.sleep(0.1)
    before = get_json(port, "/health")
    ok(before["slots_processing"] == 1, "the request is generating when its client goes away")
    t_close = time.monotonic()
    s.close()
    took, after = wait_cancelled(port, h0["requests_cancelled"], parallel, t_close, t_full)
    ok(took is not None, "the non-streamed request whose client closed its socket was cancelled")
    tokens_after = after["decode_step_tokens"] - before["decode_step_tokens"]
    ok(took < t_full / 4,
       f"its slot was free {took * 1000:.1f} ms after the close (the whole generation takes {t_full * 1000:.0f} ms)")
    ok(tokens_after < n_long / 10,
       f"{tokens_after} tokens were generated between the last /health before the close and the cancel")
    ok(after["requests_cancelled"] == h0["requests_cancelled"] + 1 and after["kv_sequences"] <= after["cached_sequences"],
       "exactly one request cancelled; its sequence is gone (only kept finished ones remain)")

    # Streamed: read three events, then close without reading on.
    h0 = after
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request_bytes("/v1/completions", dict(long_req, stream=True)))
    f = s.makefile("rb")
    events = 0
    while events < 3:
        if f.readline().startswith(b"data: "):
            events += 1
    t_close = time.monotonic()
    f.close()
    s.close()
    took, after = wait_cancelled(port, h0["requests_cancelled"], parallel, t_close, t_full)
    ok(took is not None and took < t_full / 4, f"a closed stream was cancelled, its slot free {took * 1000:.1f} ms after the close")

    # Keep-alive: two requests, one after the other, on one connection; then a next request sent
    # while the previous one still generates (its bytes wait in the socket: not a close).
    short = {"prompt": "The little dog", "max_tokens": 48, "temperature": 0}
    _, want = post(port, short)
    with socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        texts = []
        for _ in range(2):
            s.sendall(request_bytes("/v1/completions", short, keep_alive=True))
            status, body = read_response(f)
            texts.append(json.loads(body)["choices"][0]["text"])
        s.sendall(request_bytes("/v1/completions", dict(long_req, max_tokens=600), keep_alive=True))
        time.sleep(0.05)
        s.sendall(request_bytes("/v1/completions", short, keep_alive=True))
        status, body = read_response(f)
        ok(status == 200 and json.loads(body)["usage"]["completion_tokens"] == 600,
           "a request whose client sent its next request meanwhile runs to max_tokens")
        status, body = read_response(f)
        texts.append(json.loads(body)["choices"][0]["text"])
    ok(texts == [want["choices"][0]["text"]] * 3, "keep-alive requests on one connection run to the end")
    h = get_json(port, "/health")
    ok(h["requests_cancelled"] == after["requests_cancelled"], "none of them was taken for a closed client")

    # A long prompt arriving while a stream runs: the stream keeps receiving tokens while it is read.
    story = "Once upon a time, there was a little girl named Lily. She liked to play in the park. " * 14
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request_bytes("/v1/completions", dict(long_req, stream=True, max_tokens=1500)))
    f = s.makefile("rb")
    while not f.readline().startswith(b"data: "):
        pass
    h0 = get_json(port, "/health")
    p = socket.create_connection(("127.0.0.1", port))
    p.sendall(request_bytes("/v1/completions", {"prompt": story, "max_tokens": 4, "temperature": 0, "cache_prompt": False}))
    status, body = read_response(p.makefile("rb"))
    p.close()
    h1 = get_json(port, "/health")
    f.close()
    s.close()
    res = json.loads(body)
    chunks = h1["prefill_chunks"] - h0["prefill_chunks"]
    stream_tokens = h1["decode_step_tokens"] - h0["decode_step_tokens"] - res["usage"]["completion_tokens"]
    ok(status == 200 and res["usage"]["prompt_tokens"] > 200, f"a {res['usage']['prompt_tokens']}-token prompt was answered")
    ok(chunks >= res["usage"]["prompt_tokens"] // 16,
       f"it was read in {chunks} chunks of at most 16 tokens")
    ok(stream_tokens >= chunks, f"the running stream got {stream_tokens} tokens meanwhile (one per chunk at least)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
