#!/usr/bin/env python3
"""edgellm-server's HTTP front end against a running server (issue 44, findings 1-3): the request
deviations of RFC 9112 / 9110 get 400 on the wire; a 1 MiB body in 1-byte chunks and an 80k-key
JSON object cost the server little CPU (measured from /proc/PID/stat, printed, and checked against
the issue's bounds: 50 ms and 200 ms); the server then still answers.
usage: front_end.py SERVER MODEL   (exit 77 = skipped)"""
import os
import socket
import sys

from server_util import fail, ok, start_server

SKIP = 77
REPEAT = 10


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def exchange(port, data, timeout=30):
    """Sends data, reads until the server closes or answers one response; returns the status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused early: the answer is still there to read
        buf = b""
        while b"\r\n" not in buf:
            try:
                part = s.recv(65536)
            except ConnectionResetError:
                break
            if not part:
                break
            buf += part
        return buf.split(b"\r\n", 1)[0].decode(errors="replace")


def status(port, data):
    line = exchange(port, data)
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1


def main():
    server, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    if not os.path.exists("/proc/self/stat"):
        print("skipped: no /proc")
        return SKIP
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--parallel", "1"])
    try:
        return run(proc.pid, port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run(pid, port):
    get = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    ok(status(port, get) == 200, "GET /health: 200")
    # RFC 9112 section 3.2: a second Host is 400; section 6.1: a second Transfer-Encoding line (a
    # smuggling vector: chunked, then gzip) is 400; RFC 9110 section 5.5: NUL, bare CR and other
    # controls in a field value are 400; controls in the request target are 400.
    cases = {
        "two Host lines": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
        "Transfer-Encoding chunked, then a second Transfer-Encoding gzip":
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
        "NUL in a field value": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x00b\r\n\r\n",
        "bare CR in a field value": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\rb\r\n\r\n",
        "ESC in a field value": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x1bb\r\n\r\n",
        "NUL in the request target": b"GET /health\x00x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a tab in the request target": b"GET /hea\tlth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "DEL in the request target": b"GET /health\x7f HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    }
    for what, data in cases.items():
        ok(status(port, data) == 400, f"{what}: 400")

    # /proc/PID/stat counts CPU in clock ticks (10 ms): each figure is the mean of REPEAT requests.
    tick = 1e3 / os.sysconf("SC_CLK_TCK")

    def measured(data, want, what, limit_s):
        c0 = cpu_seconds(pid)
        statuses = [status(port, data) for _ in range(REPEAT)]
        cpu = (cpu_seconds(pid) - c0) / REPEAT
        print(f"{what} ({len(data)} bytes on the wire): {cpu * 1e3:.1f} ms of server CPU per request "
              f"(mean of {REPEAT}; tick {tick:.0f} ms)")
        ok(statuses == [want] * REPEAT, f"{what}: {want}")
        ok(cpu < limit_s, f"{what}: < {limit_s * 1e3:.0f} ms of server CPU")

    # Finding 1: 1 MiB in 1-byte chunks (6 MiB on the wire) to an endpoint that reads the body and
    # refuses the method (405), so what is measured is the transport.
    wire = bytearray(b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    wire += b"1\r\nx\r\n" * (1 << 20) + b"0\r\n\r\n"
    measured(bytes(wire), 405, "1 MiB body in 1-byte chunks, read whole (405 for POST /health)", 0.05)

    # Finding 2: an 80k-key JSON object (under the 1 MiB body cap) is refused while parsing.
    body = ("{\"prompt\": \"x\", \"logit_bias\": {" + ",".join(f"\"{i}\": 1" for i in range(80000)) + "}}").encode()
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    measured(req, 413, "an 80000-key JSON object", 0.2)
    ok(status(port, get) == 200, "the server still answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
