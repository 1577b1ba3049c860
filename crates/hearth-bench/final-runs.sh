#!/usr/bin/env bash
# The timed figures of issue 17, from a fresh clone in another directory, for
# a quiet machine (nothing else building: the drivers, the fakes and hearth
# share its cores, so wall-clock figures mean nothing under load).
#
# Usage: crates/hearth-bench/final-runs.sh [OUT_DIR]
#   CARGO_TARGET_DIR, when set, is used for the clone's build (point it at a
#   copy of a warm target dir to skip building the dependencies again).
#
# Steps: clone HEAD to a temp dir; `cargo build --release` there (the README's
# first command builds the same binary: default-members = hearth-cli), then the
# drivers; binary size; five starts on an empty home (start to /readyz, and
# VmRSS/RssFile/RssAnon 1 s after it); hearth-load at concurrency 1, 16, 64
# (10 s each, normal durability); the Telegram driver with one chat that
# keeps talking (three runs) and with a new chat per message. Needs git,
# cargo, curl, python3.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
clone=$(mktemp -d)/hearth
git clone -q "$repo" "$clone"
cd "$clone"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$clone/target}
bin=$CARGO_TARGET_DIR/release
log=$out/final-runs.log
{
  echo "# $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), clone at $clone"
  cargo build --release --locked 2>&1 | tail -1
  # A separate build for the drivers, so the hearth binary is the one above.
  cargo build --release --locked -p hearth-bench -p hearth-testkit 2>&1 | tail -1
  echo "binary: $(stat -c %s "$bin/hearth") bytes"
  for i in 1 2 3 4 5; do
    h=$(mktemp -d); chmod 700 "$h"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    t0=$(date +%s%N)
    "$bin/hearth" serve --home "$h" --bind "127.0.0.1:$port" >"$h/log" 2>&1 &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do sleep 0.001; done
    t1=$(date +%s%N)
    sleep 1
    echo "empty home start $i: readyz $(( (t1 - t0) / 1000 )) us;" \
      "$(grep -E '^(VmRSS|RssFile|RssAnon)' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' ')"
    kill -INT "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$h"
  done
  "$bin/hearth-load" --bin-dir "$bin" --secs 10 --concurrency 1,16,64 --strict-concurrency ''
  for i in 1 2 3; do
    "$bin/hearth-telegram-load" --bin-dir "$bin" --secs 5 --chats 1 | tail -1
  done
  "$bin/hearth-telegram-load" --bin-dir "$bin" --secs 5 --chats 1 --fresh-chats | tail -1
} 2>&1 | tee "$log"
echo "written: $log"
