# shellcheck shell=bash
# The tests' pinned outside tools, fetched when missing into a cache outside
# the clone (~/.cache), and the variables the tests find
# them by. Sourced by .ci/test (and by .ci/run for its OpenAPI check); it
# needs python3 (with its venv module) and npm, and installs nothing into the
# system:
#   ~/.cache/hearth-python                          a venv: openai, mcp, schemathesis,
#                                                   openapi-spec-validator (HEARTH_PYTHON)
#   ~/.cache/hearth-node22                          Node 22 from npm, when the system
#                                                   node is older (HEARTH_NODE)
#   ~/.cache/hearth-mcp-conformance-<version>       the MCP conformance suite
#                                                   (HEARTH_MCP_CONFORMANCE)
#   ~/.cache/hearth-npm-<version>                   the MCP reference servers
#                                                   (HEARTH_MCP_NPM_DIR)
#   ~/.cache/hearth-axe-<version>                   axe-core, injected by the dashboard's
#                                                   browser tests only (HEARTH_AXE)
# and, from the system's packages when missing, Debian's chromium and
# chromium-driver for the dashboard's browser tests and tmux for the
# terminal chat's (apt-get, as root).
# Pinned: the tests check the versions, so a new release cannot change them unseen.

# Where hearth_testkit::tools looks too when the variables are unset.
tools_cache="${HOME:-/tmp}/.cache"
mkdir -p "$tools_cache"

prereq_need() {
  command -v "$1" >/dev/null || {
    echo "error: the tests need $1 on PATH to fetch their tools ($2)" >&2
    exit 1
  }
}

echo "== test prerequisites (pinned, in $tools_cache)"

# Python packages: a venv of their own, so nothing goes into the system's
# Python (which Debian's pip refuses anyway). The tests run this python
# (hearth_testkit::tools::python, HEARTH_PYTHON).
HEARTH_PYTHON="$tools_cache/hearth-python/bin/python"
if [ ! -x "$HEARTH_PYTHON" ]; then
  prereq_need python3 "e.g. apt install python3 python3-venv"
  python3 -m venv "$tools_cache/hearth-python" || {
    echo "error: python3 -m venv failed: install Python's venv module (Debian: apt install python3-venv)" >&2
    exit 1
  }
fi
export HEARTH_PYTHON
python_pins=(openai==3.54.0 mcp==2.3.0 schemathesis==4.32.5 openapi-spec-validator==0.9.0)
if ! "$HEARTH_PYTHON" - "${python_pins[@]}" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as m
sys.exit(any(m.version(n) != v for n, v in (p.split("==") for p in sys.argv[1:])))
PY
  "$HEARTH_PYTHON" -m pip install --quiet --disable-pip-version-check "${python_pins[@]}"
fi

# The MCP conformance suite needs Node >= 22; an older system node gets
# node@22 from npm.
if [ "$(node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/')" -ge 22 ] 2>/dev/null; then
  HEARTH_NODE="$(command -v node)"
else
  HEARTH_NODE="$tools_cache/hearth-node22/node_modules/.bin/node"
  if [ ! -x "$HEARTH_NODE" ]; then
    prereq_need npm "e.g. apt install npm"
    npm install --silent --no-audit --no-fund --prefix "$tools_cache/hearth-node22" node@22
  fi
fi
export HEARTH_NODE

mcp_conformance=0.1.16
export HEARTH_MCP_CONFORMANCE="$tools_cache/hearth-mcp-conformance-$mcp_conformance/node_modules/.bin/conformance"
if [ ! -x "$HEARTH_MCP_CONFORMANCE" ]; then
  prereq_need npm "e.g. apt install npm"
  npm install --silent --no-audit --no-fund \
    --prefix "$tools_cache/hearth-mcp-conformance-$mcp_conformance" \
    "@modelcontextprotocol/conformance@$mcp_conformance"
fi

# The MCP reference servers (e2e mcp_client).
mcp_servers=2026.8.31
export HEARTH_MCP_NPM_DIR="$tools_cache/hearth-npm-$mcp_servers"
for pkg in server-everything server-filesystem; do
  if [ ! -f "$HEARTH_MCP_NPM_DIR/node_modules/@modelcontextprotocol/$pkg/package.json" ]; then
    prereq_need npm "e.g. apt install npm"
    npm install --silent --no-audit --no-fund --prefix "$HEARTH_MCP_NPM_DIR" \
      "@modelcontextprotocol/$pkg@$mcp_servers"
  fi
done

# axe-core for the dashboard's accessibility check (e2e dashboard): a test
# injects it into the page; it is never served by hearth.
axe_core=4.10.3
export HEARTH_AXE="$tools_cache/hearth-axe-$axe_core/node_modules/axe-core/axe.min.js"
if [ ! -f "$HEARTH_AXE" ]; then
  prereq_need npm "e.g. apt install npm"
  npm install --silent --no-audit --no-fund --prefix "$tools_cache/hearth-axe-$axe_core" \
    "axe-core@$axe_core"
fi

# Headless Chromium and its WebDriver for the dashboard's browser tests, and
# tmux for the terminal chat's (hearth chat under tmux): under CI=true those
# tests fail without them, elsewhere they are skipped with the reason.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v tmux >/dev/null || missing+=(tmux)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${missing[*]} (the dashboard's and the terminal chat's tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: ${missing[*]} missing and not installable here (needs root and apt-get): the dashboard's or the terminal chat's tests will fail under CI=true, and be skipped otherwise" >&2
  fi
fi
