#!/usr/bin/env python3
"""edgellm-server --write-timeout-s: a client that starts a stream and then never reads (its
socket stays open) is cut once the server's writes make no progress for that long: its request is
cancelled, its slot freed and its connection closed; another request is then served. A client that
reads slowly but steadily is not cut.
usage: write_timeout.py SERVER MODEL   (exit 77 = skipped)"""
import json
import os
import socket
import sys
import time

from server_util import exchange, fail, ok, start_server

SKIP = 77
WRITE_TIMEOUT_S = 1


def health(port):
    data = exchange(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", timeout=10)
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def stream_request(max_tokens):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "n_probs": 5}).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def main():
    server, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--parallel", "1", "-c", "4096",
                               "--write-timeout-s", str(WRITE_TIMEOUT_S)])
    try:
        return run(port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(port):
    # A stream of ~4000 events (~3 MB with n_probs 5) into a receive buffer of a few KiB that is
    # never read: the server's send buffer for streams is 256 KiB (Limits::stream_sndbuf).
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", port))
    stalled.sendall(stream_request(4000))
    t0 = time.monotonic()
    busy_seen = False
    while time.monotonic() - t0 < 60:
        h = health(port)
        if h["slots_processing"] > 0:
            busy_seen = True
        elif busy_seen or h["requests_cancelled"] or h["requests_finished"]:
            break
        time.sleep(0.05)
    freed_after = time.monotonic() - t0
    h = health(port)
    print(f"slot freed {freed_after:.2f} s after the request (--write-timeout-s {WRITE_TIMEOUT_S}); health: "
          f"cancelled {h['requests_cancelled']}, finished {h['requests_finished']}")
    ok(h["slots_processing"] == 0, "the stalled stream's slot is free")
    ok(h["requests_cancelled"] == 1 and h["requests_finished"] == 1,
       "the stalled stream ended cancelled (not run to its 4000 tokens)")
    ok(freed_after < WRITE_TIMEOUT_S + 10, f"freed within --write-timeout-s {WRITE_TIMEOUT_S} (+ the time to fill the buffers)")
    # The server closed the connection: reading it now ends (what was buffered, then EOF or reset).
    stalled.settimeout(10)
    closed = False
    try:
        while stalled.recv(1 << 20):
            pass
        closed = True
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    stalled.close()
    ok(closed, "the stalled connection was closed by the server")

    # A slow but steady reader (1 KiB every 10 ms) of a shorter stream is not cut.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(stream_request(300))
        data = b""
        while b"data: [DONE]" not in data:
            part = s.recv(1024)
            if not part:
                break
            data += part
            time.sleep(0.01)
        ok(b"data: [DONE]" in data, "a slow steady reader gets the whole stream")
    h = health(port)
    ok(h["requests_finished"] == 2 and h["requests_cancelled"] == 1, "and its request finished, not cancelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
