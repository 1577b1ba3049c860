#!/usr/bin/env bash
# Statements and transactions hearth sends to PostgreSQL per run, counted by
# the server (docs/scaling.md, "What bounds throughput"): one replica with the
# zero-latency fake provider, 5 warm-up messages, then N sequential POST
# /v1/messages (wait: true), each on a new thread. A fresh database gets
# `log_statement = 'all'`; the statements are the lines the server logs for
# it meanwhile (`statement:` for simple queries, `execute` for prepared ones),
# and the transactions are counted from them (a statement outside BEGIN ..
# COMMIT is one) and from pg_stat_database. Idle upkeep (heartbeat, a claim
# that finds nothing, the jobs duty: about one statement per 5 s) is counted
# too; with N = 100 it adds under 0.1 per run.
#
# Usage: [ONE_THREAD=1] pg-statements-per-run.sh BIN_DIR SERVER_LOG [N]
# BIN_DIR holds `hearth` built with `--features postgres` (a debug build is
# fine: this counts, it does not time) and `fake-openai`; SERVER_LOG is the
# file the cluster logs to (its log_line_prefix must hold %p). The admin URL
# is read from HEARTH_TEST_POSTGRES_URL, a role that may create databases
# and set log_statement (a superuser): the throw-away test cluster's.
# Needs psql, curl and python3.
set -euo pipefail
bin=$1; log=$2; n=${3:-100}
admin=${HEARTH_TEST_POSTGRES_URL:?set HEARTH_TEST_POSTGRES_URL to the cluster admin URL}
db="hearth_count_$$"
out=$(mktemp -d); mkdir -m 700 "$out/home"
cleanup() {
  kill "${serve:-}" "${fake:-}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql "$admin" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$out"
}
trap cleanup EXIT
psql "$admin" -qc "CREATE DATABASE $db"
psql "$admin" -qc "ALTER DATABASE $db SET log_statement = 'all'"
url=$(python3 -c 'import sys
u, db = sys.argv[1], sys.argv[2]
base, _, query = u.partition("?")
head, _, _ = base.rpartition("/") if base.count("/") > 2 else (base, "", "")
print(head + "/" + db + ("?" + query if query else ""))' "$admin" "$db")
"$bin/fake-openai" --bind 127.0.0.1:0 >"$out/fake.out" 2>&1 &
fake=$!
for _ in $(seq 50); do grep -q listening "$out/fake.out" && break; sleep 0.1; done
fake_url=$(grep -o 'http://[^ ]*' "$out/fake.out" | head -1)
printf '[llm]\ndefault_model = "fake/bench"\n[llm.providers.fake]\ntype = "openai_compat"\nbase_url = "%s"\napi_key_env = "HEARTH_BENCH_KEY"\nmodels = ["bench"]\n[log]\nlevel = "warn"\n[store]\nbackend = "postgres"\n' \
  "$fake_url" >"$out/home/hearth.toml"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HEARTH_DATABASE_URL="$url" HEARTH_BENCH_KEY=bench-key \
  HEARTH_SECRET_KEY="aGVhcnRoLWxvYWQtYmVuY2gtbWFzdGVyLWtleS0wMDA=" \
  "$bin/hearth" serve --home "$out/home" --bind "127.0.0.1:$port" >"$out/serve.out" 2>&1 &
serve=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
send() {
  curl -sf -XPOST "http://127.0.0.1:$port/v1/messages" -H 'content-type: application/json' \
    -d "{\"text\":\"hello\",\"thread_key\":\"$1\",\"wait\":true}" | grep -q '"succeeded"' \
    || echo "run on $1 did not succeed" >&2
}
# ONE_THREAD=1: every message on one thread (a chat that keeps talking).
thread() { if [ -n "${ONE_THREAD:-}" ]; then echo "count:talk"; else echo "$1:$2"; fi; }
for i in $(seq 5); do send "$(thread warm "$i")"; done
# Backends report their counters when idle, within 10 s.
commits() { psql "$admin" -Atc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'"; }
sleep 11
c0=$(commits); l0=$(wc -l <"$log")
for i in $(seq "$n"); do send "$(thread count "$i")"; done
sleep 11
l1=$(wc -l <"$log"); c1=$(commits)
sed -n "$((l0 + 1)),${l1}p" "$log" >"$out/window.log"
python3 - "$out/window.log" "$n" "$((c1 - c0))" <<'PY'
import collections, re, sys
path, n, stat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
inside, statements, transactions = set(), 0, 0
kinds = collections.Counter()
for line in open(path):
    m = re.search(r"\[(\d+)\] LOG:  (?:statement|execute [^:]*): (.*)", line)
    if not m:
        continue
    pid, sql = m.group(1), m.group(2).strip()
    statements += 1
    kinds[sql[:80]] += 1
    word = sql.upper()
    if word in ("BEGIN", "START TRANSACTION"):
        inside.add(pid)
        transactions += 1
    elif word in ("COMMIT", "ROLLBACK"):
        inside.discard(pid)
    elif pid not in inside:
        transactions += 1
print(f"runs {n}: statements {statements} ({statements / n:.2f} per run), "
      f"transactions {transactions} ({transactions / n:.2f} per run; "
      f"pg_stat_database {stat}, {stat / n:.2f})")
for sql, count in kinds.most_common():
    print(f"{count:6} {sql}")
PY
