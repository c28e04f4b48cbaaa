#!/usr/bin/env python3
"""edgellm-server for operators (issue 44): the API key from --api-key-file or EDGELLM_API_KEY (not
on the command line); POST /tokenize, /detokenize and GET /props as llama-server shapes them;
--metrics -> GET /metrics in Prometheus text whose counters follow the requests; one log line per
request on stderr (--log-format text|json) that never holds message text.
usage: operators.py SERVER MODEL WORKDIR   (exit 77 = skipped)"""
import json
import os
import socket
import subprocess
import sys
import time

from server_util import fail, ok, request, start_server

SKIP = 77
KEY = "k3y-from-a-file-0123"
ENV_KEY = "k3y-from-the-environment"
SECRET_TEXT = "zebra-marmalade-secret"  # in a prompt: must never reach the log


def metrics(port, key):
    status, head, body = request(port, "GET", "/metrics", key=key)
    ok(status == 200 and "text/plain" in head, "GET /metrics: 200, text/plain")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.split()
            values[name] = float(value)
    return values


def stop(proc):
    proc.terminate()
    try:
        rest = proc.stderr.read()
    finally:
        proc.wait(timeout=30)
    return rest


def main():
    server, model, work = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    os.makedirs(work, exist_ok=True)
    key_file = os.path.join(work, "api-key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    os.chmod(key_file, 0o600)

    # 1. --api-key-file, --metrics, JSON log lines.
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--parallel", "2", "--api-key-file", key_file,
                               "--metrics", "--log-format", "json"])
    try:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            ok(KEY.encode() not in f.read(), "the key is not on the command line")
        ok(request(port, "GET", "/v1/models")[0] == 401, "--api-key-file: no key, 401")
        ok(request(port, "GET", "/v1/models", key="wrong-key-123")[0] == 401, "--api-key-file: a wrong key, 401")
        ok(request(port, "GET", "/v1/models", key=KEY)[0] == 200, "--api-key-file: the file's key, 200")
        ok(request(port, "GET", "/health")[0] == 200, "/health needs no key")
        ok(request(port, "GET", "/metrics")[0] == 401, "/metrics needs the key")

        st, _, body = request(port, "POST", "/tokenize", {"content": "Once upon a time", "with_pieces": True}, key=KEY)
        toks = json.loads(body)["tokens"]
        ok(st == 200 and all(isinstance(t["id"], int) and "piece" in t for t in toks), "/tokenize with_pieces: ids and pieces")
        ids = [t["id"] for t in toks]
        st, _, body = request(port, "POST", "/tokenize", {"content": "Once upon a time"}, key=KEY)
        ok(st == 200 and json.loads(body)["tokens"] == ids, "/tokenize: the same ids")
        st, _, body = request(port, "POST", "/detokenize", {"tokens": ids}, key=KEY)
        ok(st == 200 and json.loads(body)["content"].strip() == "Once upon a time", "/detokenize gives the text back")
        ok(request(port, "POST", "/detokenize", {"tokens": [10 ** 6]}, key=KEY)[0] == 400, "/detokenize: an id outside the vocabulary, 400")
        ok(request(port, "POST", "/tokenize", {"content": 1}, key=KEY)[0] == 400, "/tokenize: content not a string, 400")
        st, _, body = request(port, "GET", "/props", key=KEY)
        props = json.loads(body)
        ok(st == 200 and props["total_slots"] == 2 and props["model_alias"] == os.path.basename(model) and
           props["default_generation_settings"]["n_ctx"] > 0 and props["endpoint_metrics"] is True,
           "/props: slots, alias, n_ctx, endpoint_metrics")

        before = metrics(port, KEY)
        st, _, body = request(port, "POST", "/v1/completions",
                              {"prompt": "Once upon a time " + SECRET_TEXT, "max_tokens": 12, "temperature": 0, "ignore_eos": True},
                              key=KEY)
        usage = json.loads(body)["usage"]
        st2, _, _ = request(port, "POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": SECRET_TEXT}], "max_tokens": 5, "stream": True,
                             "ignore_eos": True}, key=KEY)
        after = metrics(port, KEY)
        ok(st == 200 and st2 == 200, "two completions (one streamed)")
        d = {k: after[k] - before.get(k, 0) for k in after}
        ok(d["edgellm_requests_total"] == 2 and d["edgellm_requests_finished_total"] == 2,
           "/metrics: requests_total and requests_finished_total +2")
        ok(d["edgellm_tokens_predicted_total"] == 12 + 5, "/metrics: tokens_predicted_total +17")
        ok(d["edgellm_prompt_tokens_total"] + d["edgellm_prompt_tokens_cached_total"] >= usage["prompt_tokens"],
           "/metrics: prompt tokens counted")
        ok(d["edgellm_tokens_predicted_seconds_total"] > 0 and d["edgellm_prompt_seconds_total"] > 0,
           "/metrics: prompt and decode seconds grow")
        for _ in range(50):  # the slot of the stream just read may take a step to come back
            if after["edgellm_requests_processing"] == 0:
                break
            time.sleep(0.05)
            after = metrics(port, KEY)
        ok(after["edgellm_slots_total"] == 2 and after["edgellm_requests_processing"] == 0 and
           after["edgellm_kv_blocks_used"] >= 0 and "edgellm_weights_streamed_bytes_total" in after,
           "/metrics: slots, busy slots, KV blocks, streamed bytes")
        ok(d["edgellm_http_requests_total"] >= 3, "/metrics: http_requests_total counts every answered request")
        ok(request(port, "GET", "/nope", key=KEY)[0] == 404, "an unknown path: 404")
        status_line_refused = socket.create_connection(("127.0.0.1", port))
        status_line_refused.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        status_line_refused.recv(4096)
        status_line_refused.close()
    finally:
        log = stop(proc)
    lines = [json.loads(l) for l in log.splitlines() if l.startswith("{")]
    n_metrics = sum(1 for l in lines if l["path"] == "/metrics")
    ok(len(lines) == 14 + n_metrics, f"one JSON log line per request: {14 + n_metrics} requests, {len(lines)} lines")
    paths = [(l["method"], l["path"], l["status"]) for l in lines]
    ok(("POST", "/v1/completions", 200) in paths and ("GET", "/v1/models", 401) in paths and ("GET", "/nope", 404) in paths,
       "log lines carry method, path and status")
    comp = [l for l in lines if l["path"] == "/v1/completions"][0]
    ok(comp["completion_tokens"] == 12 and comp["prompt_tokens"] == usage["prompt_tokens"] and comp["duration_ms"] > 0,
       "a completion's log line carries its tokens and duration")
    chat = [l for l in lines if l["path"] == "/v1/chat/completions"][0]
    ok(chat["completion_tokens"] == 5, "a streamed completion's log line carries its tokens")
    ok(any(l["status"] == 400 and l["method"] == "-" for l in lines), "a transport refusal (two Host lines) is logged")
    ok(SECRET_TEXT not in log and KEY not in log, "no message text and no key in the log")

    # 2. EDGELLM_API_KEY, text log lines, no --metrics.
    env = dict(os.environ, EDGELLM_API_KEY=ENV_KEY)
    proc = subprocess.Popen([server, "-m", model, "--port", "0", "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    port = None
    for line in proc.stderr:
        if "listening on http://127.0.0.1:" in line:
            port = int(line.rsplit(":", 1)[1].split()[0])
            ok("(API key required)" in line, "EDGELLM_API_KEY: the server says a key is required")
            break
    if port is None:
        proc.wait(timeout=30)
        fail("edgellm-server did not start with EDGELLM_API_KEY")
    try:
        ok(request(port, "GET", "/v1/models")[0] == 401, "EDGELLM_API_KEY: no key, 401")
        ok(request(port, "GET", "/v1/models", key=ENV_KEY)[0] == 200, "EDGELLM_API_KEY: the key, 200")
        ok(request(port, "GET", "/metrics", key=ENV_KEY)[0] == 501, "without --metrics: /metrics is 501")
    finally:
        log = stop(proc)
    text_lines = [l for l in log.splitlines() if l.startswith("request ")]
    ok(len(text_lines) == 3 and text_lines[1].startswith("request GET /v1/models 200 "), "text log lines, one per request")

    # 3. Bad key files: exit 1 with one error line.
    for content, what in (("", "an empty key file"), ("aaaaaaaa\nbbbbbbbb\n", "two keys"), ("short\n", "a short key")):
        with open(key_file, "w") as f:
            f.write(content)
        r = subprocess.run([server, "-m", model, "--port", "0", "--api-key-file", key_file], capture_output=True, text=True, timeout=60)
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        ok(r.returncode == 1 and len(errors) == 1 and "--api-key-file" in errors[0], f"{what}: exit 1, one error line")
    r = subprocess.run([server, "-m", model, "--port", "0", "--log-format", "xml"], capture_output=True, text=True, timeout=60)
    ok(r.returncode == 1 and "error: option --log-format" in r.stderr, "--log-format xml: exit 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
