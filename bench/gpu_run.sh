#!/usr/bin/env bash
# Every GPU measurement of this project in one batch (device time is scarce: one call does it all).
# Usage on the GPU host, from the repo root, with this package's dependencies importable (wheels on PYTHONPATH):
#   bash bench/gpu_run.sh "$OUT"
# Writes results under bench/results/<date>/ (copied back as one tarball in $1) and a log.
set -u
OUT_DIR="${1:-/tmp/gpu_out}"
STAMP="$(date -u +%Y-%m-%d)"
RES="bench/results/$STAMP${RUN_TAG:+-$RUN_TAG}"
mkdir -p "$RES" "$OUT_DIR"
export PYTHONUNBUFFERED=1
HOME_DIR="$(mktemp -d /tmp/adaexplore-home.XXXX)"
# STAGES (space-separated names) limits the batch to those stages. One device call runs at most 10
# minutes, so the default is split in two batches:
#   STAGES="judge_latency judge_gpu_tests redteam_gpu" bash bench/gpu_run.sh "$OUT"        (about 8 min)
#   STAGES="large_tasks compile_roofline fidelity_gpu" bash bench/gpu_run.sh "$OUT"        (about 9 min)
#   STAGES="timing_agreement parallel_steps" (the judge vs do_bench; issue 12: throughput, timing under load)
#   STAGES="gpu_memory_trace" (device memory across evaluations: does a judge process keep what it lent?)
#   STAGES="sandbox_report" (what the runner sandbox applies on this host, and why anything is missing)
#   STAGES="profiler_residue" (does a process launch slower after torch.profiler?)
#   STAGES="judge_latency_base judge_latency" BASE_DIR=.gpu_base (an older commit's judge, then this one)
#   STAGES="judge_latency_traced" (where each request's time goes; TRACE_MODE=profile for functions)
#   STAGES="ray_pool" (issue 14; carry .raybundle from bench/ray_bundle.sh and unpack it first)
# and the older measurements: search_strategies adapt_loop worked_example collect_errors.
STAGES="${STAGES:-timing_agreement judge_latency judge_gpu_tests redteam_gpu}"
LATENCY_TASKS="${LATENCY_TASKS:-}"
stage() {  # stage NAME SECONDS COMMAND...: run with a time cap, log, never stop the batch
  local name="$1" cap="$2"; shift 2
  case " $STAGES " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name (cap ${cap}s) $(date -u +%T)"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=10 "$cap" "$@" > "$RES/$name.txt" 2>&1
  echo "   rc=$? in $((SECONDS - t0))s"
  tail -n 40 "$RES/$name.txt"
  pack
}
pack() {  # after every stage, so a batch cut short still brings back what it measured
  tar czf "$OUT_DIR/gpu_results.tgz" "$RES"
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} > "$RES/environment.txt" 2>&1
cat "$RES/environment.txt"

stage sandbox_report 60 python3 bench/sandbox_report.py --out "$RES/sandbox_report.json"
stage profiler_residue "${RESIDUE_CAP:-60}" python3 bench/profiler_residue.py --out "$RES/profiler_residue.json"
AGREEMENT_TASKS="${AGREEMENT_TASKS:-scale_bias_gelu,swish_scale_clamp,rmsnorm,layernorm,linear_bias_relu}"
stage timing_agreement "${AGREEMENT_CAP:-120}" python3 bench/timing_agreement.py --out "$RES/timing_agreement.json" \
  --tasks "$AGREEMENT_TASKS" --repeats 2
# The same tasks under an older commit's judge (BASE_DIR: `git archive <commit> | tar -x -C .gpu_base`, carried),
# run on the same machine just before: a latency is compared only with one measured on the same card.
if [ -n "${BASE_DIR:-}" ]; then
  stage judge_latency_base "${BASE_CAP:-200}" bash -c 'cd "$1" && PYTHONPATH="$PWD:${PYTHONPATH:-}" exec python3 bench/judge_latency.py --out "$2" ${3:+--tasks "$3"}' \
    _ "$(cd "$BASE_DIR" && pwd)" "$PWD/$RES/judge_latency_base.json" "$LATENCY_TASKS"
fi
stage judge_latency "${LATENCY_CAP:-240}" python3 bench/judge_latency.py --out "$RES/judge_latency.json" ${LATENCY_TASKS:+--tasks "$LATENCY_TASKS"} ${LATENCY_ARGS:-}
# The same with each runner request's time and first imports (ADAEXPLORE_TRACE_OPS=1; "profile": under cProfile).
stage judge_latency_traced "${TRACED_CAP:-90}" env ADAEXPLORE_TRACE_OPS="${TRACE_MODE:-1}" python3 bench/judge_latency.py \
  --out "$RES/judge_latency_traced.json" --tasks "${TRACED_TASKS:-swish_scale_clamp,rmsnorm}"
stage gpu_memory_trace "${MEMTRACE_CAP:-150}" python3 bench/gpu_memory_trace.py --out "$RES/gpu_memory_trace.json" ${MEMTRACE_ARGS:-}
stage judge_gpu_tests "${GPU_TESTS_CAP:-240}" env GPU_TEST_NOTES="$PWD/$RES/judge_gpu_tests_notes.txt" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_judge_gpu.py
stage redteam_gpu "${REDTEAM_CAP:-150}" python3 bench/redteam_gpu.py --out "$RES/redteam_gpu.json"
stage fidelity_gpu "${FIDELITY_CAP:-120}" env ADAEXPLORE_TEST_DEVICE=cuda python3 -m pytest -q -p no:cacheprovider tests/fidelity tests/test_fidelity_corpus.py
stage large_tasks "${LARGE_CAP:-300}" python3 bench/large_tasks.py --out "$RES/large_tasks.json" --count "${LARGE_COUNT:-30}"
stage parallel_steps "${PARALLEL_CAP:-240}" python3 bench/parallel_steps.py --out "$RES/parallel_steps.json" ${PARALLEL_ARGS:-}
# Needs ray on the host: carry .raybundle (bench/ray_bundle.sh) and unpack it after the wheel line.
stage ray_pool "${RAY_CAP:-240}" python3 bench/ray_pool.py --out "$RES/ray_pool.json" ${RAY_TASKS:+--tasks "$RAY_TASKS"} ${RAY_ARGS:-}
stage compile_roofline "${COMPILE_CAP:-180}" python3 bench/compile_roofline.py --out "$RES/compile_roofline.json" \
  ${COMPILE_TASKS:+--tasks "$COMPILE_TASKS"}
# The rest share one data directory (and so one lock per GPU: timings never overlap).
stage search_strategies 120 python3 bench/search_strategies.py --tasks 3 --budget 6 --home "$HOME_DIR" \
  --out "$RES/search_strategies.json" &
stage adapt_loop 120 python3 bench/adapt_loop.py --tasks 12 --drafts 4 --seed 0 --home "$HOME_DIR/adapt" \
  --out "$RES/adapt_loop.json" --deadline 100 --eval-timeout 30 &
wait
mkdir -p "$RES/worked"
stage worked_example 40 env ADAEXPLORE_HOME="$HOME_DIR/worked" python3 -m adaexplore_mcp demo --task rmsnorm --budget 10
cp "$HOME_DIR"/worked/exports/* "$RES/worked/" 2>/dev/null
stage collect_errors "${COLLECT_CAP:-30}" python3 bench/collect_errors.py --mode native --out "$RES/errors-gpu.json"
pack
echo "== done $(date -u +%T)"
