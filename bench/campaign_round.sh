#!/usr/bin/env bash
# One campaign round on the GPU host, from the repository root, with the package's dependencies importable:
# submit the proposals in D, judge them, hand out the next briefs. D comes back as $OUT/D.tgz, written every 15 s
# while the round runs too, so a call cut off keeps what the store attached (the next call goes on from there).
#   D=.campaign/D T=540 DL=510 bash bench/campaign_round.sh
# T: seconds the round may run (keep it under the call's limit); DL: no new submission or hand-out after this.
# W: judge workers (default 12 on a GPU of more than 100 GB, else 10: round 1 saw reference deaths and cuBLAS
# allocation failures beside 9 busy workers on big tasks).
set -u
D="${D:-.campaign/D}"
OUT="${OUT:-/tmp/campaign_out}"
mkdir -p "$OUT"
PARENT="$(dirname "$D")"
NAME="$(basename "$D")"
(while true; do tar czf "$OUT/$NAME.tgz.part" -C "$PARENT" "$NAME" 2>/dev/null && mv "$OUT/$NAME.tgz.part" "$OUT/$NAME.tgz"
  sleep 15; done) &
TARPID=$!
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/env.txt"
MEM="$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)"
if [ -z "${W:-}" ]; then if [ "${MEM:-0}" -gt 100000 ]; then W=12; else W=10; fi; fi
echo "workers $W" >> "$OUT/env.txt"
ADAEXPLORE_WORKERS_PER_GPU=$W ADAEXPLORE_TIMEOUT_S_GPU=120 timeout "${T:-540}" python3 bench/campaign.py round \
  --dir "$D" --deadline-s "${DL:-510}" --concurrency 24 > "$OUT/round.log" 2>&1
echo "round rc=$?" >> "$OUT/round.log"
kill $TARPID; wait $TARPID 2>/dev/null
tar czf "$OUT/$NAME.tgz" -C "$PARENT" "$NAME"
rm -f "$OUT/$NAME.tgz.part"
