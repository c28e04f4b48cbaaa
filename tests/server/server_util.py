"""Helpers shared by the edgellm-server test scripts (python3's standard library only)."""
import re
import subprocess
import sys


def fail(why):
    print(f"FAIL: {why}")
    sys.stdout.flush()
    raise SystemExit(1)


def ok(cond, what):
    if not cond:
        fail(what)
    print(f"ok: {what}")
    sys.stdout.flush()


def start_server(cmd):
    """Starts edgellm-server (cmd, with --port 0); returns (process, port) once it says its port."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        sys.stderr.write(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    proc.wait(timeout=30)
    fail("edgellm-server did not say its port")


def exchange(port, data, timeout=30):
    """Sends data on a new connection to 127.0.0.1:port and returns every byte until the server closes."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        resp = b""
        while True:
            part = s.recv(65536)
            if not part:
                return resp
            resp += part


def request(port, method, path, body=None, key=None):
    """One HTTP request (body: bytes, or an object sent as JSON) on its own connection; returns
    (status, head as text, body with chunked transfer decoded)."""
    import json
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    resp = exchange(port, head.encode() + b"\r\n" + data)
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while True:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, head.decode(errors="replace"), body
