#!/usr/bin/env bash
# Regenerates crates/hearth-cli/startup-order.txt: the functions hearth runs to
# start, to idle and to answer messages, which release builds link next to
# each other (see crates/hearth-cli/build.rs for why). Run it after changes to
# dependencies or to start-up, then rebuild and re-measure idle RSS
# (BENCHMARKS.md).
#
# The binary traced is the one `cargo build --release -p hearth-cli` ships,
# symbols kept (HEARTH_KEEP_SYMBOLS=1 only leaves out the link-time strip), so
# the names it records are the shipped build's. Needs valgrind, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${ORDER_TARGET_DIR:-${TMPDIR:-/tmp}/hearth-order-target}"
HEARTH_KEEP_SYMBOLS=1 CARGO_TARGET_DIR="$target" \
  cargo build --release --locked -p hearth-cli
# The fake provider, for the traced runs (its own build; not traced).
CARGO_TARGET_DIR="$target" cargo build --release --locked -p hearth-testkit --bin fake-openai
bin="$target/release/hearth"

work=$(mktemp -d)
fake=""
trap '[ -n "$fake" ] && kill "$fake" 2>/dev/null; rm -rf "$work"' EXIT
"$target/release/fake-openai" >"$work/fake.out" 2>&1 &
fake=$!
for _ in $(seq 50); do grep -q listening "$work/fake.out" && break; sleep 0.1; done
fake_url=$(grep -o 'http://[^ ]*' "$work/fake.out")

# Traces one start, three idle seconds, one request and `$3` messages (each
# on a new thread) with `$1` as hearth.toml (none when empty: a first start,
# which writes the home's files and logs at the default level).
trace() {
  local home="$work/home-$2"
  mkdir -m 700 "$home"
  if [ -n "$1" ]; then printf '%b' "$1" > "$home/hearth.toml"; fi
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  HEARTH_HOME="$home" valgrind --tool=callgrind --demangle=no \
    --callgrind-out-file="$work/cg-$2.out" "$bin" serve --bind "127.0.0.1:$port" \
    >"$work/log-$2" 2>&1 &
  local vg=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/log-$2"; exit 1; }
  # An idle server's periodic work, and one request.
  sleep 3
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null
  for i in $(seq "$3"); do
    curl -sf -X POST "http://127.0.0.1:$port/v1/messages" -H 'content-type: application/json' \
      -d "{\"text\":\"hello there\",\"thread_key\":\"api:order$i\",\"wait\":true}" >/dev/null
  done
  kill -INT "$vg"
  wait "$vg" || true
}

# A new home (the README's first start), an empty one, then one with a provider configured (most homes have one; its
# client is built at start) and nothing listening at its address (start-up
# does not call it), then one whose provider answers, sending messages: the
# code of a run follows start-up's in the order, so a busy server touches
# fewer pages too.
provider='[log]\nlevel = "warn"\n[llm]\ndefault_model = "local/m"\n[llm.providers.local]\ntype = "openai_compat"\nmodels = ["m"]\n'
trace '' new 0
trace '[log]\nlevel = "warn"\n' empty 0
trace "${provider}base_url = \"http://127.0.0.1:9/v1\"\n" provider 0
trace "${provider}base_url = \"$fake_url\"\n" runs 20

# Function names callgrind saw, first appearance first (the new home's run,
# then what each other adds), kept when they are text symbols of the binary.
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ {print $3}' > "$work/syms"
awk 'NR == FNR { sym[$0] = 1; next }
     match($0, /^c?fn=\([0-9]+\) /) {
       name = substr($0, RLENGTH + 1)
       if ((name in sym) && !(name in seen)) { seen[name] = 1; print name }
     }' "$work/syms" "$work/cg-new.out" "$work/cg-empty.out" "$work/cg-provider.out" \
  "$work/cg-runs.out" \
  > crates/hearth-cli/startup-order.txt
echo "startup-order.txt: $(wc -l < crates/hearth-cli/startup-order.txt) functions"
