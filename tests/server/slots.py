#!/usr/bin/env python3
"""edgellm-server --slot-save-path DIR: POST /slots/{id}?action=save|restore|erase {"filename": F}
(llama-server's API). A request's kept prompt cache saved by one server and restored by another is
reused by the same request there (all of the prompt but its last token) with the same greedy
text; file names that could leave DIR, an unknown slot, a file that is no state, a missing
--slot-save-path are refused with a message.
usage: slots.py SERVER MODEL WORKDIR   (exit 77 = skipped)"""
import json
import os
import shutil
import sys

from server_util import ok, request, start_server

SKIP = 77
PROMPT = "Once upon a time there was a little girl who loved to play in the garden with her dog"


def complete(port):
    status, _, body = request(port, "POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0})
    ok(status == 200, "POST /v1/completions: 200")
    j = json.loads(body)
    return j["choices"][0]["text"], j["timings"]


def slot(port, sid, action, body=None):
    status, _, data = request(port, "POST", f"/slots/{sid}?action={action}", body if body is not None else {})
    return status, json.loads(data)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def main(server, model, work):
    if not os.path.exists(model):
        print(f"skipped: {model} not found")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cmd = [server, "-m", model, "--port", "0", "-t", "1", "-c", "256", "--slot-save-path", work]

    proc, port = start_server(cmd)
    try:
        cold, t = complete(port)
        ok(t["cache_n"] == 0, "a first request reads its whole prompt")
        status, j = slot(port, 0, "save", {"filename": "story.state"})
        ok(status == 200 and j["n_saved"] > 20 and j["n_written"] > 1000 and j["filename"] == "story.state",
           f"save: 200, {j.get('n_saved')} tokens, {j.get('n_written')} bytes")
        ok(os.path.exists(os.path.join(work, "story.state")), "the file is in --slot-save-path")
        for bad in ["../story.state", "/etc/passwd", ".hidden", "a/b", "", "x" * 300]:
            status, j = slot(port, 0, "save", {"filename": bad})
            ok(status == 400 and "filename" in j["error"]["message"], f"save {bad[:20]!r}: 400 naming the file name")
        status, j = slot(port, 7, "save", {"filename": "x.state"})
        ok(status == 400 and "no kept sequence 7" in j["error"]["message"], "save of an unknown slot: 400")
        status, j = slot(port, 0, "frobnicate", {"filename": "x.state"})
        ok(status == 400 and "action" in j["error"]["message"], "an unknown action: 400")
        ok(request(port, "POST", "/slots/zero?action=erase", {})[0] == 404, "/slots/<not a number>: 404")
        ok(request(port, "GET", "/slots/0?action=erase")[0] == 405, "GET /slots/0: 405")
        status, j = slot(port, 0, "erase")
        ok(status == 200 and j["n_erased"] > 20, "erase: 200 and the tokens dropped")
        status, j = slot(port, 0, "erase")
        ok(status == 400 and "no kept sequence 0" in j["error"]["message"], "erase again: 400")
    finally:
        stop(proc)

    proc, port = start_server(cmd)
    try:
        status, j = slot(port, 0, "restore", {"filename": "story.state"})
        ok(status == 200 and j["n_restored"] > 20, f"restore in a new server: {j}")
        warm, t = complete(port)
        # (the kept sequence holds the prompt and the answer: the prompt less its last token is reused)
        ok(t["cache_n"] > 20 and t["prompt_n"] == 1 and t["cache_n"] < j["n_restored"],
           f"the restored tokens are reused: {t['cache_n']} cached, {t['prompt_n']} read")
        ok(warm == cold, "the same greedy text after restore")
        with open(os.path.join(work, "junk.state"), "wb") as f:
            f.write(b"GGUF" + bytes(100))
        status, j = slot(port, 0, "restore", {"filename": "junk.state"})
        ok(status == 400 and "not an edgellm session file" in j["error"]["message"] and work not in j["error"]["message"],
           "a file that is no state: 400, without the folder's path")
        status, j = slot(port, 0, "restore", {"filename": "missing.state"})
        ok(status == 400 and "cannot open" in j["error"]["message"], "a missing file: 400")
    finally:
        stop(proc)

    proc, port = start_server(cmd[:-2])
    try:
        status, j = slot(port, 0, "save", {"filename": "story.state"})
        ok(status == 501 and "--slot-save-path" in j["error"]["message"], "without --slot-save-path: 501")
    finally:
        stop(proc)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
