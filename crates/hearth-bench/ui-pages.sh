#!/usr/bin/env bash
# The dashboard's pages on a big home: the time to serve each page's HTML
# (curl's time_total, 127.0.0.1, keep-alive off), p50 and p95 of N requests
# after one warm-up request. Usage, on a seeded home (hearth-seed-home):
#   cargo build --release -p hearth-cli -p hearth-bench
#   target/release/hearth-seed-home --home /tmp/big             # 1,000,000 runs, 100,000 threads
#   target/release/hearth --home /tmp/big serve &                # no token: open on loopback
#   crates/hearth-bench/ui-pages.sh http://127.0.0.1:7777 [N=40]
set -euo pipefail
base=${1:-http://127.0.0.1:7777}
n=${2:-40}
run=$(curl -sf "$base/v1/runs?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["run_id"])')
thread=$(curl -sf "$base/v1/runs/$run" | python3 -c 'import json,sys,urllib.parse; print(urllib.parse.quote(json.load(sys.stdin)["thread_key"], safe=""))')
pages=(/ui /ui/runs "/ui/runs?status=failed" "/ui/runs/$run" /ui/threads "/ui/threads/$thread"
  "/ui/threads?q=ordinary+length" "/ui/threads?q=api%3Aseed-0999"
  /ui/confirmations /ui/usage /ui/usage.csv "/ui/usage.csv?since=30d&group_by=day"
  /ui/budget /ui/router /ui/jobs /ui/channels /ui/mcp /ui/skills /ui/memory /ui/settings)
printf '%-40s %8s %8s\n' page p50_ms p95_ms
for p in "${pages[@]}"; do
  curl -s -o /dev/null "$base$p"
  for _ in $(seq "$n"); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$base$p"
  done | python3 -c '
import sys
rows = [l.split() for l in sys.stdin]
bad = [c for c, _ in rows if c != "200"]
t = sorted(float(s) * 1000 for _, s in rows)
p = lambda q: t[min(len(t) - 1, int(q * len(t)))]
print("%-40s %8.1f %8.1f%s" % (sys.argv[1][:40], p(0.5), p(0.95), "  (non-200: %s)" % bad[0] if bad else ""))
' "$p"
done
