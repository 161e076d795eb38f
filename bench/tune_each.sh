#!/usr/bin/env bash
# Tune each [[shape]] of a shapes file in its own `tui tune --json` call on the GPU machine, one
# compact JSON line per shape appended to OUTFILE, so a shape that runs out of time loses only
# itself; then the summary table. Usage: bench/tune_each.sh SHAPES.toml BUDGET_S OUTFILE
# PROFILE names the profile (default: the one detected from the GPU).
set -uo pipefail
file=$1; budget=${2:-60}; out=${3:-${OUT:-.}/tune.jsonl}
python3 - "$file" > /tmp/shapes.txt <<'PY'
import sys, tomllib
for s in tomllib.load(open(sys.argv[1], "rb"))["shape"]:
    print(f"{s['m']},{s['n']},{s['k']}")
PY
profile_args=()
[ -n "${PROFILE:-}" ] && profile_args=(--profile "$PROFILE")
while read -r shape; do
  timeout $((${budget%.*} + 60)) python3 -m tui.main tune --backend cuda "${profile_args[@]}" --shape "$shape" \
    --budget "$budget" --json 2>>"$out.err" | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))" >> "$out"
  echo "tuned $shape rc=${PIPESTATUS[0]}"
done < /tmp/shapes.txt
python3 -m bench.tune_summary "$out" --classes "$file" ${TUNE_TORCH:-}
