# Sourced by the server test scripts (POSIX sh): start_server LOG CMD... starts CMD (an
# edgellm-server with --port 0, possibly behind an emulator) in the background, sets $pid, waits
# for its "listening on http://127.0.0.1:PORT" line in LOG and sets $port; kills it on exit.
start_server() {
  log=$1
  shift
  "$@" 2> "$log" &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && return 0
    kill -0 $pid 2>/dev/null || { cat "$log"; echo "FAIL: edgellm-server exited"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: edgellm-server did not say its port"
  exit 1
}
