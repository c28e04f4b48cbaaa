"""Constrained answers end to end (issue: grammars, JSON Schema, tool calls).

For stories260K and tiny-qwenvocab (Qwen2's 151,936 tokens) and every schema of
../shared/data/grammar/schemas.json: 20 answers at temperature 1 with different seeds through
edgellm-server's response_format {"type": "json_schema"} and 20 through edgellm-cli
--json-schema-file (--parallel 20: seeds S..S+19 in one run) all parse and validate (Debian's
python3-jsonschema). Then tool calls on stories260K under the Qwen2.5 and Llama 3.1 templates: two
tools with tool_choice "required" give a tool_calls answer whose arguments validate against the
tool's parameters, the same call streamed and not; the tool's result sent back gets a plain answer;
a named function is the one called; bad grammars, schemas and tools are 400s naming the field.
usage: structured.py SERVER CLI SHARED   (exit 77: skipped)"""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from server_util import fail, ok, start_server

SEEDS = int(os.environ.get("EDGELLM_STRUCTURED_SEEDS", "20"))  # CI's sanitized build: fewer


def post(port, body, path="/v1/chat/completions"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read().decode()
            return r.status, (json.loads(raw) if not body.get("stream") else raw)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def stream_calls(raw):
    """The tool_calls deltas and the finish_reason of a streamed answer."""
    calls, finish, content = [], None, ""
    for line in raw.split("\n"):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = json.loads(line[6:])["choices"][0]
        calls += ch["delta"].get("tool_calls", [])
        content += ch["delta"].get("content") or ""
        finish = ch["finish_reason"] or finish
    return calls, finish, content


def check_answer(jsonschema, model, name, seed, via, text, ended, open_count):
    # The budget closes what is open (GrammarConstraint's budget rule): an answer that max_tokens
    # ended is still a sentence of the grammar, so it validates like the others; it is counted.
    if not ended:
        open_count[0] += 1
    try:
        jsonschema.validate(json.loads(text), schema_of[name])
    except Exception as e:  # noqa: BLE001 - any parse or validation failure fails the test
        fail(f"{os.path.basename(model)} {name} seed {seed} ({via}): {e}\n{text!r}")


schema_of = {}


def schema_answers(server, cli, model, schemas, jsonschema):
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "-c", "1024"])
    try:
        for s in schemas:
            name, schema = s["name"], s["schema"]
            schema_of[name] = schema
            open_count = [0]
            for seed in range(1, SEEDS + 1):
                body = {"messages": [{"role": "user", "content": "Give me " + name}], "temperature": 1, "seed": seed,
                        "max_tokens": 600,
                        "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}
                status, r = post(port, body)
                if status != 200:
                    fail(f"{model} {name} seed {seed}: HTTP {status} {r}")
                check_answer(jsonschema, model, name, seed, "server", r["choices"][0]["message"]["content"],
                             r["choices"][0]["finish_reason"] == "stop", open_count)
            ok(True, f"{os.path.basename(model)} {name}: {SEEDS} server answers validate"
                     f"{f' ({open_count[0]} of them closed by the max_tokens budget)' if open_count[0] else ''}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with tempfile.TemporaryDirectory() as tmp:
        for s in schemas:
            name, schema = s["name"], s["schema"]
            path = os.path.join(tmp, name + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(schema, f)
            r = subprocess.run([cli, "-m", model, "-p", "Once upon a time", "-n", "600", "--temp", "1", "--seed", "1",
                                "-t", "1", "--parallel", str(SEEDS), "--timings", "--json-schema-file", path],
                               capture_output=True, text=True, errors="replace", timeout=600)
            if r.returncode != 0:
                fail(f"edgellm-cli {name}: {r.stderr}")
            parts = re.split(r"^--- continuation \d+ \(seed \d+\) ---\n", r.stdout, flags=re.M)[1:]
            if len(parts) != SEEDS:
                fail(f"edgellm-cli {name}: {len(parts)} continuations, want {SEEDS}")
            stops = re.findall(r"^\[stop: ([a-z ]+)\]", r.stderr, flags=re.M)
            if len(stops) != SEEDS:
                fail(f"edgellm-cli {name}: {len(stops)} stop lines, want {SEEDS}")
            open_count = [0]
            for i, text in enumerate(parts):
                text = text[:-1] if text.endswith("\n") else text
                check_answer(jsonschema, model, name, i + 1, "cli", text, stops[i] == "eos", open_count)
            ok(True, f"{os.path.basename(model)} {name}: {SEEDS} CLI answers validate"
                     f"{f' ({open_count[0]} of them closed by the -n budget)' if open_count[0] else ''}")


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_alarm", "description": "Sets an alarm",
     "parameters": {"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}},
                    "required": ["time"], "additionalProperties": False}}},
]


def tool_calls(server, model, template, want_format, jsonschema):
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1", "--chat-template-file", template])
    tname = os.path.basename(template)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=30) as r:
            props = json.load(r)
        ok(props["tool_call_format"] == want_format, f"{tname}: /props says tool_call_format {want_format}")
        params = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        for seed in (1, 2, 3):
            body = {"messages": msgs, "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
                    "temperature": 1, "seed": seed, "max_tokens": 300}
            status, r = post(port, body)
            if status != 200:
                fail(f"{tname}: HTTP {status} {r}")
            choice = r["choices"][0]
            calls = choice["message"].get("tool_calls")
            if not calls or choice["finish_reason"] != "tool_calls":
                fail(f"{tname} seed {seed}: no tool_calls answer: {choice}")
            call = calls[0]
            jsonschema.validate(json.loads(call["function"]["arguments"]), params[call["function"]["name"]])
            ok(call["type"] == "function" and call["id"], f"{tname} seed {seed}: {call['function']['name']}"
               f"({call['function']['arguments']}) validates")
            status, raw = post(port, dict(body, stream=True))
            scalls, finish, _ = stream_calls(raw)
            ok(status == 200 and finish == "tool_calls" and len(scalls) == 1 and
               scalls[0]["function"] == call["function"] and scalls[0]["index"] == 0,
               f"{tname} seed {seed}: the streamed answer has the same call")
        # The tool's result back: a plain answer (tool_choice auto; stories260K writes prose).
        history = msgs + [{"role": "assistant", "content": None, "tool_calls": calls},
                          {"role": "tool", "tool_call_id": calls[0]["id"], "content": "{\"temperature\": 21}"}]
        status, r = post(port, {"messages": history, "tools": TOOLS, "temperature": 0, "max_tokens": 24})
        ok(status == 200 and isinstance(r["choices"][0]["message"]["content"], str) and
           r["choices"][0]["finish_reason"] in ("stop", "length"), f"{tname}: the tool result gets a plain answer")
        # A named function is the one called.
        status, r = post(port, {"messages": msgs, "tools": TOOLS, "seed": 4, "max_tokens": 300, "parallel_tool_calls": False,
                                "tool_choice": {"type": "function", "function": {"name": "set_alarm"}}})
        ok(status == 200 and r["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "set_alarm",
           f"{tname}: tool_choice naming set_alarm calls it")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def refusals(server, model):
    proc, port = start_server([server, "-m", model, "--port", "0", "-t", "1"])
    try:
        msgs = [{"role": "user", "content": "hi"}]
        for body, param in [
            ({"grammar": "root ::= undefined-rule"}, "grammar"),
            ({"json_schema": {"type": "object", "patternProperties": {}}}, "json_schema"),
            ({"response_format": {"type": "yaml"}}, "response_format"),
            ({"tools": [{"type": "function", "function": {}}]}, "tools"),
            ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "launch"}}}, "tool_choice"),
            ({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "grammar"),
        ]:
            status, r = post(port, dict(body, messages=msgs, max_tokens=4))
            ok(status == 400 and r["error"]["param"] == param, f"400 naming {param}: {r['error']['message']}")
        # The chat template here is built-in (stories260K has none): tools cannot be rendered.
        status, r = post(port, {"messages": msgs, "tools": TOOLS, "max_tokens": 4})
        ok(status == 400, f"tools with a built-in chat format: 400 ({r['error']['message']})")
        # json_object and a GBNF grammar on /v1/completions.
        status, r = post(port, {"prompt": "Once", "grammar": "root ::= \"yes\" | \"no\"", "max_tokens": 8}, "/v1/completions")
        ok(status == 200 and r["choices"][0]["text"] in ("yes", "no"), f"completions with a grammar: {r['choices'][0]['text']!r}")
        status, r = post(port, {"messages": msgs, "response_format": {"type": "json_object"}, "seed": 2, "max_tokens": 400})
        ok(status == 200 and isinstance(json.loads(r["choices"][0]["message"]["content"]), dict), "json_object gives an object")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    server, cli, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    data = os.path.join(shared, "data")
    stories = os.path.join(data, "models", "stories260K.gguf")
    qwen = os.path.join(data, "grammar", "tiny-qwenvocab-Q4_0.gguf")
    if not (os.path.exists(stories) and os.path.exists(qwen)):
        print("skipped: ../shared/data not found")
        raise SystemExit(77)
    try:
        import jsonschema  # noqa: PLC0415 - Debian's python3-jsonschema, only for this test
    except ImportError:
        # A python3 of its own first in PATH: Debian's has the module.
        if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        print("skipped: no jsonschema module (apt-get install python3-jsonschema)")
        raise SystemExit(77)
    with open(os.path.join(data, "grammar", "schemas.json"), encoding="utf-8") as f:
        schemas = json.load(f)
    refusals(server, stories)
    tdir = os.path.join(data, "templates")
    tool_calls(server, stories, os.path.join(tdir, "Qwen-Qwen2.5-7B-Instruct.jinja"), "hermes", jsonschema)
    tool_calls(server, stories, os.path.join(tdir, "meta-llama-Llama-3.1-8B-Instruct.jinja"), "llama3", jsonschema)
    for model in (stories, qwen):
        schema_answers(server, cli, model, schemas, jsonschema)


if __name__ == "__main__":
    main()
