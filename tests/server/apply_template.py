"""POST /apply-template renders every shared chat template x conversation byte for byte as
../shared/tools/render_chat.py (Python's Jinja2, as Hugging Face's apply_chat_template), and the
template's refusals (raise_exception) are 400s carrying its message. edgellm-server loads
stories260K with --chat-template-file for each template. Needs Debian's python3-jinja2 for the
reference; skips (77) without it or without ../shared/data."""
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from server_util import fail, ok, start_server


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/apply-template", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def main():
    server, model, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    tdir = os.path.join(shared, "data", "templates")
    script = os.path.join(shared, "tools", "render_chat.py")
    if not (os.path.exists(model) and os.path.isdir(tdir) and os.path.exists(script)):
        print("skipped: ../shared/data not found")
        raise SystemExit(77)
    if subprocess.run(["/usr/bin/python3", "-c", "import jinja2"], capture_output=True).returncode != 0:
        print("skipped: /usr/bin/python3 has no jinja2 (apt-get install python3-jinja2)")
        raise SystemExit(77)
    convs = json.load(open(os.path.join(tdir, "conversations.json"), encoding="utf-8"))
    templates = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja"))
    ctx_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"apply-template-{os.getpid()}.json")
    same = refused = 0
    for name in templates:
        proc, port = start_server([server, "-m", model, "--port", "0", "-c", "256", "--parallel", "1",
                                   "--chat-template-file", os.path.join(tdir, name)])
        try:
            for conv in convs:
                ctx = dict(conv["context"])
                with open(ctx_path, "w", encoding="utf-8") as f:
                    json.dump(ctx, f, ensure_ascii=False)
                ref = subprocess.run(["/usr/bin/python3", script, os.path.join(tdir, name), ctx_path],
                                     capture_output=True, text=True)
                # The request: messages, tools and add_generation_prompt as the API takes them; the
                # other variables (enable_thinking) as chat_template_kwargs. BOS / EOS come from the
                # model's vocabulary (stories260K: <s>, </s>, as in the contexts).
                body = {"messages": ctx.pop("messages"), "add_generation_prompt": ctx.pop("add_generation_prompt", True)}
                if "tools" in ctx:
                    body["tools"] = ctx.pop("tools")
                ctx.pop("bos_token", None)
                ctx.pop("eos_token", None)
                if ctx:
                    body["chat_template_kwargs"] = ctx
                status, answer = post(port, body)
                where = f"{name} x {conv['name']}"
                if ref.returncode == 0:
                    if status != 200 or answer.get("prompt") != ref.stdout:
                        fail(f"{where}: {status} {json.dumps(answer)[:300]} != {ref.stdout[:300]!r}")
                    same += 1
                else:
                    want = ref.stderr.strip().split(": ", 2)[-1]
                    msg = answer.get("error", {}).get("message", "")
                    if status != 400 or want not in msg:
                        fail(f"{where}: the reference refuses ({want!r}), edgellm answered {status} {msg!r}")
                    refused += 1
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    if os.path.exists(ctx_path):
        os.remove(ctx_path)
    ok(same + refused == len(templates) * len(convs),
       f"{len(templates)} templates x {len(convs)} conversations: {same} byte-identical renderings, {refused} refusals as the reference")


if __name__ == "__main__":
    main()
