#!/usr/bin/env bash
# Regenerates crates/hearth-cli/startup-order.txt: the functions hearth runs to
# start and to idle, which release builds link next to each other (see
# crates/hearth-cli/build.rs for why). Run it after changes to dependencies or
# to start-up, then rebuild and re-measure idle RSS (BENCHMARKS.md).
#
# Needs valgrind. Builds an unstripped release binary in its own target dir.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${ORDER_TARGET_DIR:-${TMPDIR:-/tmp}/hearth-order-target}"
CARGO_PROFILE_RELEASE_STRIP=false CARGO_TARGET_DIR="$target" \
  cargo build --release --locked -p hearth-cli
bin="$target/release/hearth"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Traces one start, three idle seconds and one request with `$1` as hearth.toml.
trace() {
  local home="$work/home-$2"
  mkdir -m 700 "$home"
  printf '%b' "$1" > "$home/hearth.toml"
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
  kill -INT "$vg"
  wait "$vg" || true
}

# An empty home, then one with a provider configured (most homes have one; its
# client is built at start). Nothing listens at the provider's address: start-up
# does not call it.
trace '[log]\nlevel = "warn"\n' empty
trace '[log]\nlevel = "warn"\n[llm]\ndefault_model = "local/m"\n[llm.providers.local]\ntype = "openai_compat"\nbase_url = "http://127.0.0.1:9/v1"\nmodels = ["m"]\n' provider

# Function names callgrind saw, first appearance first (the empty home's run,
# then what the other adds), kept when they are text symbols of the binary.
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ {print $3}' > "$work/syms"
awk 'NR == FNR { sym[$0] = 1; next }
     match($0, /^c?fn=\([0-9]+\) /) {
       name = substr($0, RLENGTH + 1)
       if ((name in sym) && !(name in seen)) { seen[name] = 1; print name }
     }' "$work/syms" "$work/cg-empty.out" "$work/cg-provider.out" > crates/hearth-cli/startup-order.txt
echo "startup-order.txt: $(wc -l < crates/hearth-cli/startup-order.txt) functions"
