# Sourced by .ci/test: a throw-away PostgreSQL cluster for the tests that need
# one. Installs Debian's postgresql when it is missing and this shell may
# (root with apt-get), makes a cluster in a temporary directory (initdb and
# pg_ctl as the postgres user when run as root), on a random port with its
# socket in that directory, exports HEARTH_TEST_POSTGRES_URL, and removes the
# cluster when the shell exits. The same port listens on 127.0.0.1 with TLS
# (a certificate for localhost signed by a CA made here with openssl), for the
# tests of `sslmode=require`: HEARTH_TEST_POSTGRES_TLS_PORT and
# HEARTH_TEST_POSTGRES_TLS_CA (the CA's PEM file).
# Without PostgreSQL the tests that need it are skipped with one line each,
# except under CI=true, where they fail.
#
# Set HEARTH_TEST_POSTGRES_URL beforehand to use a server of your own: each
# test makes a database `hearth_t_<time>_<random>` there and leaves it, and a
# later run drops those over six hours old that nobody is connected to.

hearth_pg_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}

hearth_pg_start() {
  if [ -n "${HEARTH_TEST_POSTGRES_URL:-}" ]; then
    echo "== PostgreSQL: the server in HEARTH_TEST_POSTGRES_URL"
    return 0
  fi
  local bindir
  if ! bindir="$(hearth_pg_bindir)"; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "== PostgreSQL: installing Debian's postgresql"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } ||
        true
    fi
    bindir="$(hearth_pg_bindir)" || {
      echo "== PostgreSQL: not installed (apt install postgresql); its tests are skipped${CI:+, and fail under CI=true}"
      return 0
    }
  fi
  HEARTH_PG_DIR="$(mktemp -d /tmp/hearth-pg.XXXXXX)"
  chmod 755 "$HEARTH_PG_DIR"
  local run=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$HEARTH_PG_DIR"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$bindir/initdb" -D "$HEARTH_PG_DIR/data" -A trust -U postgres -E UTF8 \
    --locale=C --no-sync >"$HEARTH_PG_DIR/initdb.log" 2>&1 ||
    { cat "$HEARTH_PG_DIR/initdb.log"; return 1; }
  # A CA and a server certificate for localhost, for TLS over TCP.
  local tls=() tls_dir="$HEARTH_PG_DIR/tls"
  if command -v openssl >/dev/null 2>&1 && mkdir "$tls_dir" &&
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hearth test CA" \
      -keyout "$tls_dir/ca.key" -out "$tls_dir/ca.pem" >/dev/null 2>&1 &&
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
      -keyout "$tls_dir/server.key" -out "$tls_dir/server.csr" >/dev/null 2>&1 &&
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tls_dir/san.ext" &&
    openssl x509 -req -in "$tls_dir/server.csr" -CA "$tls_dir/ca.pem" -CAkey "$tls_dir/ca.key" \
      -CAcreateserial -days 2 -extfile "$tls_dir/san.ext" -out "$tls_dir/server.pem" >/dev/null 2>&1; then
    chmod 600 "$tls_dir/server.key"
    [ "$(id -u)" = 0 ] && chown -R postgres: "$tls_dir"
    tls=(-c listen_addresses=127.0.0.1 -c ssl=on -c "ssl_cert_file=$tls_dir/server.pem"
      -c "ssl_key_file=$tls_dir/server.key")
  else
    echo "== PostgreSQL: no openssl, so no TLS listener; the sslmode=require tests are skipped${CI:+, and fail under CI=true}"
    tls=(-c "listen_addresses=''")
  fi
  local port tries=0
  while :; do
    port=$((20000 + RANDOM % 40000))
    # A throw-away cluster needs no durability: fsync off keeps the tests fast.
    if "${run[@]}" "$bindir/pg_ctl" -D "$HEARTH_PG_DIR/data" -l "$HEARTH_PG_DIR/server.log" -w -s \
      -o "-p $port -k $HEARTH_PG_DIR ${tls[*]} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
      start; then
      break
    fi
    tries=$((tries + 1))
    [ "$tries" -lt 5 ] || { cat "$HEARTH_PG_DIR/server.log"; return 1; }
  done
  HEARTH_PG_CTL=("${run[@]}" "$bindir/pg_ctl" -D "$HEARTH_PG_DIR/data" -m immediate -s stop)
  export HEARTH_TEST_POSTGRES_URL="postgres://postgres@/postgres?host=$HEARTH_PG_DIR&port=$port"
  if [ -f "$tls_dir/server.pem" ]; then
    export HEARTH_TEST_POSTGRES_TLS_PORT="$port" HEARTH_TEST_POSTGRES_TLS_CA="$tls_dir/ca.pem"
  fi
  echo "== PostgreSQL: a throw-away cluster in $HEARTH_PG_DIR (port $port)"
}

hearth_pg_stop() {
  if [ -n "${HEARTH_PG_DIR:-}" ]; then
    "${HEARTH_PG_CTL[@]}" >/dev/null 2>&1 || true
    rm -rf "$HEARTH_PG_DIR"
  fi
}
