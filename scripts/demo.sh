#!/usr/bin/env bash
# `make demo`: a real adaptive_asha search on a throwaway local cluster, start to finish.
#
# Starts `stalwart up --detach` on a free port with a temporary home, runs the Core API example
# (examples/core_api/3_hpsearch.yaml) with -f, waits for it, prints the trials and the best
# checkpoint, and stops the cluster. Exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-.venv/bin}"
STW="$BIN/stalwart"

home="$(mktemp -d "${TMPDIR:-/tmp}/stalwart-demo.XXXXXX")"
port="$("$BIN/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export STALWART_MASTER="http://127.0.0.1:$port"
export XDG_CONFIG_HOME="$home/config"   # keep the demo's login out of the user's token store

cleanup() {
    "$STW" down --home "$home" >/dev/null 2>&1 || true
    rm -rf "$home"
}
trap cleanup EXIT

echo "== stalwart up (home $home)"
"$STW" up --detach --home "$home" --port "$port" --slots 4
echo "" | "$STW" user login admin

echo "== stalwart experiment create examples/core_api/3_hpsearch.yaml examples/core_api -f"
out="$home/create.log"
"$STW" experiment create examples/core_api/3_hpsearch.yaml examples/core_api -f | tee "$out"
id="$(sed -n 's/^Created experiment \([0-9][0-9]*\).*/\1/p' "$out" | head -1)"
[ -n "$id" ] || { echo "demo: no experiment was created" >&2; exit 1; }

echo "== stalwart experiment wait $id"
"$STW" experiment wait "$id"

echo "== the trials"
"$STW" experiment list-trials "$id"
echo "== the best checkpoint"
"$STW" experiment list-checkpoints "$id" --best 1
echo "== done: experiment $id COMPLETED"
