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
