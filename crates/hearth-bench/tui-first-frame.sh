#!/usr/bin/env bash
# `hearth chat` (the TUI): time from starting it to its first connected frame,
# and its CPU and RSS while idle, against a release `hearth serve` on a fresh
# home (127.0.0.1 only). Needs tmux and curl. Usage:
#   cargo build --release -p hearth-cli
#   crates/hearth-bench/tui-first-frame.sh [path/to/hearth]
# "First frame" is measured from tmux starting the command to the pane showing
# the status line's "connected" (so it includes the health check and the
# thread's first read), polled every 2 ms; ten starts, one per line.
set -euo pipefail
bin=${1:-target/release/hearth}
home=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
session="hearth-tui-bench-$$"
"$bin" --home "$home" serve --bind "127.0.0.1:$port" >"$home/serve.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; tmux kill-session -t "$session" 2>/dev/null; rm -rf "$home"' EXIT
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
tmux new-session -d -s "$session" -x 100 -y 30 "sleep 600"
for i in $(seq 10); do
  t0=$(date +%s%N)
  tmux respawn-pane -k -t "$session" "HEARTH_URL=http://127.0.0.1:$port $bin chat --thread cli:bench$i"
  until tmux capture-pane -p -t "$session" | grep -q "connected"; do sleep 0.002; done
  t1=$(date +%s%N)
  echo "first_frame_ms=$(((t1 - t0) / 1000000))"
done
pid=$(pgrep -f "$bin chat --thread cli:bench10" | head -1)
read -r _ _ _ _ _ _ _ _ _ _ _ _ _ u0 s0 _ <"/proc/$pid/stat"
sleep 30
read -r _ _ _ _ _ _ _ _ _ _ _ _ _ u1 s1 _ <"/proc/$pid/stat"
echo "idle_cpu_ticks_30s=$((u1 + s1 - u0 - s0)) (1 tick = 1/$(getconf CLK_TCK) s)"
echo "idle_rss_kb=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")"
