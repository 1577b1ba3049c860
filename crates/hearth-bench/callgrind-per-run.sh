#!/usr/bin/env bash
# Instructions hearth executes per run: a release hearth under callgrind with
# the zero-latency fake provider, 20 warm-up messages, counters zeroed, then N
# sequential POST /v1/messages on new threads, dumped. Divide the PROGRAM
# TOTALS of `callgrind_annotate OUT/cg.out.1` by N; diff two outputs' inclusive
# costs to see what a setting costs (BENCHMARKS.md, the router next to fixed).
#
# Usage: callgrind-per-run.sh BIN_DIR OUT_DIR [EXTRA_TOML] [N] [WARM]
# BIN_DIR holds a release `hearth` built with its symbols
# (`HEARTH_KEEP_SYMBOLS=1 cargo build --release -p hearth-cli`: same code and
# layout as the shipped, stripped one) and `fake-openai`; EXTRA_TOML is
# appended to hearth.toml with FAKE_URL replaced by the fake's address (pass ''
# for none). WARM is the number of warm-up messages (20).
# With ONE_THREAD=1 every message (warm-up included) goes to the same thread,
# so each run loads a history that grows by two messages per run: a thread
# that keeps talking, as the Telegram benchmark's single chat.
# Needs valgrind and curl.
set -euo pipefail
bin=$1; out=$2; extra=${3:-}; n=${4:-200}; warm=${5:-20}
rm -rf "$out"; mkdir -p "$out/home"; chmod 700 "$out/home"
"$bin/fake-openai" >"$out/fake.out" 2>&1 &
fake=$!
trap 'kill $fake 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$out/fake.out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$out/fake.out")
printf '[llm]\ndefault_model = "fake/bench"\n[llm.providers.fake]\ntype = "openai_compat"\nbase_url = "%s"\napi_key_env = "HEARTH_BENCH_KEY"\nmodels = ["bench"]\n[log]\nlevel = "warn"\n' "$url" >"$out/home/hearth.toml"
if [ -n "$extra" ]; then sed "s#FAKE_URL#$url#" "$extra" >>"$out/home/hearth.toml"; fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HEARTH_BENCH_KEY=bench-key valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" "$bin/hearth" serve \
  --home "$out/home" --bind "127.0.0.1:$port" >"$out/serve.out" 2>&1 &
vg=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
send() {
  if [ -n "${ONE_THREAD:-}" ]; then set -- one; fi
  curl -sf -X POST "http://127.0.0.1:$port/v1/messages" -H 'content-type: application/json' \
    -d "{\"text\":\"hello there\",\"thread_key\":\"api:$1\",\"wait\":true}" >/dev/null
}
for i in $(seq "$warm"); do send "warm$i"; done
callgrind_control -z "$vg" >/dev/null
for i in $(seq "$n"); do send "t$i"; done
callgrind_control -d "$vg" >/dev/null
sleep 1
kill "$vg"; wait "$vg" 2>/dev/null || true
callgrind_annotate "$out/cg.out.1" | grep 'PROGRAM TOTALS'
