#!/usr/bin/env python3
"""edgellm-server with a draft model (-md: stories260K as its own draft): a speculative request
(llama-server's "speculative.n_max"), a prompt-lookup request ("lookup": true) and a plain one
("speculative.n_max": 0) decoded together in the slots; each greedy text equals edgellm-cli's for
the same prompt, and the speculative ones report their drafts (timings.draft_n, draft_n_accepted).
usage: speculative.py SERVER CLI MODEL   (exit 77 = skipped)"""
import json
import os
import subprocess
import sys
import threading
import urllib.request

from server_util import fail, ok, start_server

SKIP = 77
N = 32


def cli_text(cli, model, prompt):
    out = subprocess.run([cli, "-m", model, "-p", prompt, "-n", str(N), "--temp", "0", "-t", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    return out.decode()[:-1]  # the CLI ends its output with a newline


def complete(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def main():
    server, cli, model = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    proc, port = start_server([server, "-m", model, "-md", model, "--port", "0", "-t", "1", "--parallel", "3",
                               "-c", "256"])
    try:
        cases = [
            ("Once upon a time", {"speculative.n_max": 4}, True),
            ("Lily and Tom went to the park. Lily and Tom", {"lookup": True, "speculative.n_max": 3}, None),
            ("The little dog", {"speculative.n_max": 0}, False),
        ]
        results = [None] * len(cases)

        def run(i):
            prompt, extra, _ = cases[i]
            body = {"prompt": prompt, "max_tokens": N, "temperature": 0}
            body.update(extra)
            results[i] = complete(port, body)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (prompt, extra, drafts), res in zip(cases, results):
            if res is None:
                fail(f"no answer for {extra}")
            text = res["choices"][0]["text"]
            ok(text == cli_text(cli, model, prompt), f"{extra}: the server's text equals edgellm-cli's")
            timings = res.get("timings", {})
            if drafts is True:
                ok(timings.get("draft_n", 0) > 0 and timings.get("draft_n_accepted") == timings.get("draft_n"),
                   f"{extra}: every draft of the model's own drafts accepted ({timings.get('draft_n_accepted')}/{timings.get('draft_n')})")
            if drafts is False:
                ok("draft_n" not in timings, f"{extra}: no drafts")
        # A bad value is a 400 naming the field.
        try:
            complete(port, {"prompt": "x", "speculative.n_min": 5, "speculative.n_max": 2})
            fail("speculative.n_min above n_max was accepted")
        except urllib.error.HTTPError as e:
            ok(e.code == 400 and "speculative.n_min" in e.read().decode(), "speculative.n_min above n_max: 400")
        return 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
