#!/bin/bash
# The board build's edgellm-server under qemu-aarch64 -cpu CPU answers POST /v1/completions on
# loopback with the greedy continuation the same build's edgellm-cli prints (which
# deploy_cli_stories260K_greedy_* checks against the x86 reference). bash for /dev/tcp: the cross
# build has no HTTP client of its own. usage: run_server.sh QEMU CPU SERVER CLI MODEL WORKDIR [SYSROOT]
# (SYSROOT: qemu -L for a dynamic build; a static one needs none)
set -eu
qemu=$1 cpu=$2 server=$3 cli=$4 model=$5 work=$6 sysroot=${7:-}
emu="$qemu -cpu $cpu"
[ -z "$sysroot" ] || emu="$emu -L $sysroot"
[ -f "$model" ] || { echo "skipped: $model not found"; exit 0; }
mkdir -p "$work"
want=$($emu "$cli" -m "$model" -p "Once upon a time" -n 48 --temp 0 -t 1 2>/dev/null)
. "$(dirname "$0")/../server/start_server.sh"
start_server "$work/server.err" $emu "$server" -m "$model" --port 0 -t 1
body='{"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0}'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
  "${#body}" "$body" >&3
reply=$(cat <&3)
exec 3<&-
# The text as JSON writes it: backslash, quote and newline escaped.
esc=$(printf '%s' "$want" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | sed -e ':a' -e 'N' -e '$!ba' -e 's/\n/\\n/g')
case "$reply" in
  "HTTP/1.1 200"*"\"text\":\"$esc\""*) echo "ok: -cpu $cpu edgellm-server answers with edgellm-cli's text" ;;
  *) echo "FAIL: -cpu $cpu: want text [$esc], got:"; printf '%s\n' "$reply"; exit 1 ;;
esac
