#!/usr/bin/env bash
# A model larger than its memory budget, run as on a small board (../shared/tools/boardsim: memory
# cgroup counting anonymous memory and page cache, page cache dropped first): it completes, no
# OOM kill, peak memory within the budget plus the documented margin, and the logits hashes equal
# the unbudgeted run's. Then the same under a cgroup limit alone (budget detected from it).
# usage: check_stream_boardsim.sh EDGELLM_BENCH BOARDSIM WORKDIR
# Prints "skipped: ..." and exits 0 where boardsim cannot run (no ../shared, not root, no cgroups).
set -u
BENCH=$1 BOARDSIM=$2 WORK=$3
BUDGET_MIB=48        # the model file is ~94 MiB
MARGIN_MIB=32        # docs/PERF.md "Larger than memory": peak <= budget + 32 MiB
[[ -x $BOARDSIM ]] || { echo "skipped: no boardsim at $BOARDSIM (../shared/tools)"; exit 0; }
[[ $(id -u) = 0 ]] || { echo "skipped: boardsim needs root"; exit 0; }
if ! msg=$("$BOARDSIM" --quiet --no-drop -- true 2>&1); then echo "skipped: boardsim cannot run here: $msg"; exit 0; fi
mkdir -p "$WORK"
MODEL=$WORK/stream-llama-160m-Q4_0.gguf
fail() { echo "FAIL: $*"; exit 1; }
hashes() { grep -o '"logits_hash": "[^"]*"' | tr '\n' ' '; }
if [[ ! -s $MODEL ]]; then
  "$BENCH" --preset llama-160m --type Q4_0 --write-gguf "$MODEL" -p 0 -n 1 -r 1 -t 2 >/dev/null 2>&1 || fail "cannot write $MODEL"
fi
ARGS=(-m "$MODEL" -p 24 -n 4 -r 1 -t 2 -o jsonl)
want=$("$BENCH" "${ARGS[@]}" 2>/dev/null | hashes)
[[ -n $want ]] || fail "no logits hash from the unbudgeted run"
echo "unbudgeted: $want"

check_run() {  # $1: label, $2: boardsim --mem, $3: max peak MiB, rest: extra bench flags
  local label=$1 mem=$2 max_peak=$3
  shift 3
  local out err rc
  err=$(mktemp)
  out=$("$BOARDSIM" --mem "$mem" --read-mbps 1000 -- "$BENCH" "${ARGS[@]}" -v "$@" 2>"$err")
  rc=$?
  local line
  line=$(grep '^boardsim:' "$err")
  echo "$label: $line"
  grep -E 'memory budget|streamed from storage' "$err" | cut -c1-200
  rm -f "$err"
  [[ $rc = 0 ]] || fail "$label: exit $rc"
  local peak oom
  peak=$(sed -n 's/.*peak_mem_mib=\([0-9]*\).*/\1/p' <<<"$line")
  oom=$(sed -n 's/.*oom_kills=\([0-9?]*\).*/\1/p' <<<"$line")
  [[ $oom = 0 ]] || fail "$label: $oom OOM kills"
  (( peak <= max_peak )) || fail "$label: peak memory $peak MiB > $max_peak MiB"
  local got
  got=$(hashes <<<"$out")
  [[ $got == "$want" ]] || fail "$label: logits hashes $got differ from the unbudgeted $want"
}
check_run "budget $BUDGET_MIB MiB" 256 $((BUDGET_MIB + MARGIN_MIB)) --mem-budget "$BUDGET_MIB"
# No flag: the budget comes from the cgroup limit (less the margin of runtime/memory_limit.hpp).
check_run "cgroup limit 80 MiB, detected budget" 80 80
echo "ok"
