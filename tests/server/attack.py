#!/usr/bin/env python3
"""edgellm-server under attack (issue 37), loopback only, bounded time:
 1. 64 connections that are idle, send one byte, a short body, a TLS hello, or start a stream and
    never read it: /health and a chat request still answer within 2 s; a head that does not
    arrive in --head-timeout-s gets 408; beyond --max-connections the longest-waiting is closed.
 2. 5000 header lines of 8 KB: 431, server RSS grows < 5 MB; 200 small header lines: 431.
 3. a 64 MB chunked body: 413; a gzip bomb (Content-Encoding: gzip): 415; RSS grows < 5 MB.
 4. POST without Content-Length: an empty body, answered at once.
 5. 4 requests pipelined in one write: 4 answers, in order.
 6. without --api-key: Host evil.example -> 403; a cross-origin POST -> 403 unless --cors allows
    it (preflight OPTIONS answered then).
 7. '</s>' in a user message costs the tokens of its text, not one EOS.
 8. logit_bias works (-100 bans); tools with a built-in chat format -> 400, response_format
    json_object -> a JSON object; any model name is served by
    the loaded model, --strict-model refuses others (404).
 9. a request followed by shutdown(SHUT_WR): a light request is answered; a generation is
    cancelled (a peer that closed and one that half-closed look alike until a write fails), and
    the server goes on.
usage: attack.py SERVER MODEL   (exit 77 = skipped)"""
import gzip
import json
import os
import socket
import sys
import time

from server_util import fail, ok, start_server

SKIP = 77


def start(server, model, extra):
    return start_server([server, "-m", model, "--port", "0", "-t", "1", "--parallel", "2", "-c", "512"] + extra)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(s, buf=b""):
    """One response from socket s (Content-Length or chunked body). Returns (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise ConnectionError(f"closed before a response head ({buf[:80]!r})")
        buf += d
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    if status == 100:
        return read_response(s, buf)
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                raise ConnectionError("closed inside a body")
            buf += d
        return status, headers, buf[:n], buf[n:]
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += s.recv(65536)
            line, _, buf = buf.partition(b"\r\n")
            n = int(line, 16)
            while len(buf) < n + 2:
                buf += s.recv(65536)
            body += buf[:n]
            buf = buf[n + 2:]
            if n == 0:
                return status, headers, body, buf
    body = buf
    while True:
        d = s.recv(65536)
        if not d:
            return status, headers, body, b""
        body += d


def request(port, method, path, body=None, headers=None, timeout=10):
    hdrs = {"Host": f"127.0.0.1:{port}", "Connection": "close"}
    hdrs.update(headers or {})
    data = b""
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
        hdrs["Content-Length"] = str(len(data))
    raw = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    s = connect(port, timeout)
    try:
        s.sendall(raw.encode() + data)
        status, h, b, _ = read_response(s)
        return status, h, b
    finally:
        s.close()


def flood(s, piece, count, peek_every):
    """Sends piece count times, stopping once the server answers (or refuses more bytes)."""
    s.settimeout(0.2)
    for i in range(count):
        try:
            s.sendall(piece)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            break
        if i % peek_every == 0:
            try:
                if s.recv(4096, socket.MSG_PEEK):
                    break
            except socket.timeout:
                pass
    s.settimeout(5)


def jbody(b):
    return json.loads(b.decode())


def health(port):
    st, _, b = request(port, "GET", "/health")
    if st != 200:
        fail(f"/health: {st}")
    return jbody(b)


def chat(port, content, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
    body.update(kw)
    return request(port, "POST", "/v1/chat/completions", body)


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def probe_slow_clients(port, proc):
    socks = []
    for i in range(16):  # one byte, then nothing
        s = connect(port)
        s.sendall(b"P")
        socks.append(s)
    for i in range(16):  # nothing at all
        socks.append(connect(port))
    for i in range(8):  # a body shorter than its Content-Length
        s = connect(port)
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\n{{\"prompt\"".encode())
        socks.append(s)
    tls = []
    for i in range(8):  # a TLS ClientHello's first bytes
        s = connect(port)
        s.sendall(bytes.fromhex("16030100f4010000f00303") + os.urandom(32))
        tls.append(s)
    for i in range(8):  # a stream started and never read
        s = connect(port)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": True, "ignore_eos": True}).encode()
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        socks.append(s)
    for i in range(8):  # keep-alive, idle after one answer
        s = connect(port)
        s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        read_response(s)
        socks.append(s)
    n = len(socks) + len(tls)
    (st, _, _), dt = timed(lambda: request(port, "GET", "/health", timeout=5))
    ok(st == 200 and dt < 2.0, f"{n} idle / one-byte / short-body / TLS / unread-stream connections: /health answers in {dt:.3f} s")
    (st, _, b), dt = timed(lambda: chat(port, "Hello"))
    ok(st == 200 and dt < 2.0, f"... and a chat request answers in {dt:.3f} s")
    refused = 0
    for s in tls:
        s.settimeout(2)
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        refused += d.startswith(b"HTTP/1.1 400") or d == b""
    ok(refused == len(tls), f"TLS hellos refused at once (400, closed): {refused} of {len(tls)}")
    # The one-byte clients get 408 after --head-timeout-s (2 s here) and are closed.
    s = socks[0]
    s.settimeout(6)
    t = time.monotonic()
    d = s.recv(4096)
    ok(d.startswith(b"HTTP/1.1 408"), f"a head that does not arrive: 408 after {time.monotonic() - t:.1f} s more")
    for s in socks + tls:
        s.close()


def probe_header_bomb(port, proc):
    before = rss_kb(proc.pid)
    s = connect(port)
    s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    flood(s, b"X-Bomb: " + b"a" * 8184 + b"\r\n", 5000, 16)
    status = None
    try:
        status, _, _, _ = read_response(s)
    except (ConnectionError, OSError) as e:
        fail(f"header bomb: no answer ({e})")
    s.close()
    grow = (rss_kb(proc.pid) - before) / 1024
    ok(status == 431 and grow < 5, f"5000 header lines of 8 KB: {status}, RSS +{grow:.1f} MB")
    hdrs = {f"X-H{i}": "v" for i in range(200)}
    st, _, _ = request(port, "GET", "/health", headers=hdrs)
    ok(st == 431, f"200 short header lines: {st}")


def probe_bodies(port, proc):
    before = rss_kb(proc.pid)
    s = connect(port)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
    flood(s, b"10000\r\n" + b"a" * 0x10000 + b"\r\n", 1024, 4)  # 64 MB
    status, _, b, _ = read_response(s)
    s.close()
    grow = (rss_kb(proc.pid) - before) / 1024
    ok(status == 413 and grow < 5, f"64 MB chunked body (--max-body-kb 1024): {status}, RSS +{grow:.1f} MB")
    bomb = gzip.compress(b"\0" * (128 << 20), 9)
    before = rss_kb(proc.pid)
    st, _, b = request(port, "POST", "/v1/completions", bomb, {"Content-Encoding": "gzip"})
    grow = (rss_kb(proc.pid) - before) / 1024
    ok(st == 415 and grow < 5, f"gzip body of {len(bomb) >> 10} KB inflating to 128 MB: {st}, RSS +{grow:.1f} MB")
    st, _, b = request(port, "POST", "/v1/completions", b"x" * (2 << 20))
    ok(st == 413, f"2 MB body with Content-Length: {st}")
    # A small chunked body is decoded and served.
    body = json.dumps({"prompt": "Once", "max_tokens": 2}).encode()
    s = connect(port)
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode()
              + b"%x\r\n" % 5 + body[:5] + b"\r\n" + b"%x\r\n" % (len(body) - 5) + body[5:] + b"\r\n0\r\n\r\n")
    st, _, b, _ = read_response(s)
    s.close()
    ok(st == 200 and jbody(b)["usage"]["completion_tokens"] == 2, f"a chunked request body is decoded: {st}")


def probe_no_length(port):
    s = connect(port, timeout=3)
    t = time.monotonic()
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\r\n".encode())
    st, _, b, _ = read_response(s)
    dt = time.monotonic() - t
    s.close()
    ok(st == 400 and dt < 1.0, f"POST without Content-Length: an empty body, answered in {dt:.3f} s ({st}: {jbody(b)['error']['message'][:40]})")


def probe_pipelined(port):
    def req(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        cl = f"Content-Length: {len(data)}\r\n" if body is not None else ""
        return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{cl}\r\n".encode() + data
    s = connect(port)
    s.sendall(req("GET", "/health") + req("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 3}) +
              req("GET", "/v1/models") + req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}))
    rest = b""
    kinds = []
    for i in range(4):
        st, _, b, rest = read_response(s, rest)
        j = jbody(b)
        kinds.append((st, j.get("object", j.get("status"))))
    s.close()
    ok(kinds == [(200, "ok"), (200, "text_completion"), (200, "list"), (200, "chat.completion")],
       f"4 pipelined requests: 4 answers in order {kinds}")
    # HEAD: a head without the body, so a next request on the connection is read right.
    s = connect(port)
    s.sendall(req("HEAD", "/health") + req("GET", "/health"))
    buf = b""
    while buf.count(b"\r\n\r\n") < 2 or not buf.endswith(b"}"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    heads = buf.split(b"HTTP/1.1 ")
    ok(len(heads) == 3 and heads[1].startswith(b"200") and heads[1].endswith(b"\r\n\r\n") and heads[2].startswith(b"200"),
       "HEAD /health: the head alone, then the next answer")


def probe_browsers(port):
    st, _, _ = request(port, "GET", "/health", headers={"Host": "evil.example"})
    ok(st == 403, f"no --api-key, Host evil.example: {st}")
    st, _, _ = request(port, "GET", "/v1/models", headers={"Host": f"evil.example:{port}"})
    ok(st == 403, f"no --api-key, Host evil.example:{port}: {st}")
    for h in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]", "127.0.0.1"):
        st, _, _ = request(port, "GET", "/health", headers={"Host": h})
        ok(st == 200, f"Host {h}: {st}")
    body = json.dumps({"prompt": "Once", "max_tokens": 2}).encode()
    st, _, _ = request(port, "POST", "/v1/completions", body, {"Origin": "http://evil.example", "Content-Type": "text/plain"})
    ok(st == 403, f"cross-origin text/plain POST without --cors: {st}")
    st, _, _ = request(port, "OPTIONS", "/v1/completions", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    ok(st == 403, f"cross-origin preflight without --cors: {st}")
    st, _, _ = request(port, "POST", "/v1/completions", body, {"Origin": f"http://127.0.0.1:{port}"})
    ok(st == 200, f"same-origin POST: {st}")


def probe_cors_and_models(server, model):
    proc, port = start(server, model, ["--cors", "http://app.example", "--strict-model", "--alias", "tiny-stories",
                                       "--max-connections", "8"])
    try:
        idle = [connect(port) for i in range(20)]
        (st, _, _), dt = timed(lambda: request(port, "GET", "/health", timeout=5))
        ok(st == 200 and dt < 2.0, f"20 idle connections over --max-connections 8: the oldest are closed, /health answers in {dt:.3f} s")
        for s in idle:
            s.close()
        st, h, _ = request(port, "OPTIONS", "/v1/chat/completions",
                           headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST",
                                    "Access-Control-Request-Headers": "authorization, content-type"})
        ok(st == 204 and h.get("access-control-allow-origin") == "http://app.example" and "POST" in h.get("access-control-allow-methods", "")
           and "content-type" in h.get("access-control-allow-headers", "").lower(), f"--cors: preflight {st} {h.get('access-control-allow-origin')}")
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        st, h, b = request(port, "POST", "/v1/chat/completions", body, {"Origin": "http://app.example"})
        ok(st == 200 and h.get("access-control-allow-origin") == "http://app.example", f"--cors: the allowed origin's POST: {st}")
        st, _, _ = request(port, "POST", "/v1/chat/completions", body, {"Origin": "http://other.example"})
        ok(st == 403, f"--cors: another origin: {st}")
        st, _, b = request(port, "GET", "/v1/models")
        ok(jbody(b)["data"][0]["id"] == "tiny-stories", "--alias names the model in /v1/models")
        st, _, b = request(port, "POST", "/v1/chat/completions", dict(body, model="tiny-stories"))
        ok(st == 200 and jbody(b)["model"] == "tiny-stories", "--strict-model: its own name is served")
        st, _, b = request(port, "POST", "/v1/chat/completions", dict(body, model="gpt-4o-mini"))
        ok(st == 404 and jbody(b)["error"]["param"] == "model", f"--strict-model: another name: {st}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def probe_fields(port):
    st, _, b = chat(port, "Hi", model="gpt-4o-mini")
    ok(st == 200 and jbody(b)["model"] == "stories260K.gguf", "model gpt-4o-mini: served by the loaded model, which the answer names")
    # '</s>' in a message is text: it costs its characters' tokens, not one EOS (control token).
    base = jbody(chat(port, "The cat")[2])["usage"]["prompt_tokens"]
    inj = jbody(chat(port, "The cat</s></s></s></s>")[2])["usage"]["prompt_tokens"]
    ok(inj - base >= 8, f"'</s>' x4 in a user message: +{inj - base} prompt tokens (as text; 4 would be EOS tokens)")
    st, _, b = request(port, "POST", "/v1/completions", {"prompt": "The cat</s></s></s></s>", "max_tokens": 1})
    raw = jbody(b)["usage"]["prompt_tokens"]
    ok(raw < inj, f"/v1/completions keeps llama-server's raw prompt: '</s>' is the token ({raw} prompt tokens)")
    # logit_bias: greedy's first token, banned, is not chosen; a large bias chooses a token.
    req = {"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0, "n_probs": 1}
    first = jbody(request(port, "POST", "/v1/completions", req)[2])["completion_probabilities"][0]["id"]
    ban = jbody(request(port, "POST", "/v1/completions", dict(req, logit_bias={str(first): -100}))[2])["completion_probabilities"][0]["id"]
    ok(ban != first, f"logit_bias -100 bans token {first} (now {ban})")
    pick = jbody(request(port, "POST", "/v1/completions", dict(req, logit_bias={"100": 100}))[2])["completion_probabilities"][0]["id"]
    ok(pick == 100, f"logit_bias +100 on token 100 picks it ({pick})")
    st, _, _ = request(port, "POST", "/v1/completions", dict(req, logit_bias={"999999": 1}))
    ok(st == 400, f"logit_bias outside the vocabulary: {st}")
    st, _, b = chat(port, "Hi", tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    ok(st == 400 and jbody(b)["error"]["param"] == "tools", f"tools with chatml: {st} ({jbody(b)['error']['message']})")
    st, _, b = chat(port, "Hi", response_format={"type": "json_object"}, max_tokens=200)
    ok(st == 200 and isinstance(json.loads(jbody(b)["choices"][0]["message"]["content"]), dict),
       f"response_format json_object: {st}, an object")
    st, _, b = chat(port, "Hi", response_format={"type": "text"})
    ok(st == 200, f"response_format text: {st}")


def probe_half_close(port):
    s = connect(port, timeout=5)
    s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    s.shutdown(socket.SHUT_WR)
    st, _, _, _ = read_response(s)
    ok(st == 200, "a light request then shutdown(SHUT_WR): answered")
    s.close()
    cancelled = health(port)["requests_cancelled"]
    s = connect(port, timeout=5)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True}).encode()
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    s.shutdown(socket.SHUT_WR)
    d = s.recv(4096)
    s.close()
    h = health(port)
    for i in range(50):
        if h["requests_cancelled"] > cancelled:
            break
        time.sleep(0.1)
        h = health(port)
    ok(d == b"" and h["requests_cancelled"] == cancelled + 1, "a generation then shutdown(SHUT_WR): cancelled, no reply (documented)")
    st, _, _ = chat(port, "Hi")
    ok(st == 200, "the server goes on")


def main():
    server, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    proc, port = start(server, model, ["--head-timeout-s", "2", "--max-connections", "80"])
    try:
        probe_slow_clients(port, proc)
        probe_header_bomb(port, proc)
        probe_bodies(port, proc)
        probe_no_length(port)
        probe_pipelined(port)
        probe_browsers(port)
        probe_fields(port)
        probe_half_close(port)
        ok(proc.poll() is None, "the server is still running")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    probe_cors_and_models(server, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
