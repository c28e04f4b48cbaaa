#!/bin/sh
# edgellm-eval --server URL gives what edgellm-eval gives in-process: the same generated text and
# answer for every item and budget (--outputs JSONL) and the same accuracy columns, stories260K
# greedy behind edgellm-server. usage: eval_server.sh SERVER EVAL MODEL TASK WORKDIR (77 = skipped)
set -eu
server=$1 eval=$2 model=$3 task=$4 work=$5
[ -f "$model" ] || { echo "skipped: $model not found"; exit 77; }
mkdir -p "$work"
. "$(dirname "$0")/start_server.sh"
start_server "$work/server.err" "$server" -m "$model" --port 0 -t 1 --parallel 2
"$eval" -m "$model" -f "$task" -n 16,48 -t 1 --outputs "$work/in-process.jsonl" > "$work/in-process.csv"
"$eval" --server "http://127.0.0.1:$port" -f "$task" -n 16,48 --outputs "$work/server.jsonl" > "$work/server.csv"
# Same items, texts and answers; same accuracy and token columns (latency and RSS differ).
cmp "$work/in-process.jsonl" "$work/server.jsonl" || { echo "FAIL: outputs differ"; diff "$work/in-process.jsonl" "$work/server.jsonl" | head; exit 1; }
cut -d, -f1-8 "$work/in-process.csv" > "$work/a" && cut -d, -f1-8 "$work/server.csv" > "$work/b"
cmp "$work/a" "$work/b" || { echo "FAIL: accuracy columns differ"; cat "$work/in-process.csv" "$work/server.csv"; exit 1; }
n=$(wc -l < "$work/server.jsonl")
[ "$n" -gt 0 ] || { echo "FAIL: no outputs"; exit 1; }
echo "ok: $n generations through the server equal in-process"
