#!/usr/bin/env bash
# One device call's worth of work on the GPU machine: install the carried wheels, then run the
# steps named as arguments (facts, gpu-tests with PYTEST_K, PYTEST_ARGS and GPU_TESTS_FILES (the whole
# suite needs about 11 minutes: more than one call, so split it by file), bench-cli with CLI_ARGS, check, bench with BENCH_ARGS, calibrate, sm90 with
# SM90_ARGS, ncu with NCU_CASES, ncu-source with NCU_CASES, membound-hints with HINTS_ARGS, membound-bulk with BULK_ARGS, energy with ENERGY_ARGS, energy-cli, ramp with RAMP_ARGS, swap with SWAP_ARGS,
# ncu-metrics with NCU_CASES, bench-all with CLI_ARGS (every kernel and dtype), tui, skinny with SKINNY_ARGS, tune with TUNE_ARGS, gpu-file with GPU_FILE, tune-each with TUNE_SHAPES and TUNE_BUDGET,
# soak with SOAK_S). Logs go to $OUT. PROFILE names the profile for tune, tune-each, calibrate and soak; left
# unset they use the one detected from the GPU (the H200 is h200, an H100 SXM h100-sxm).
set -uo pipefail
OUT=${OUT:-./out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export SOL_COCKPIT_DATA_DIR=/tmp/sol-data SOL_COCKPIT_CACHE_DIR=/tmp/sol-cache SOL_COCKPIT_CONFIG_DIR=/tmp/sol-config
tui() { python3 -m tui.main "$@"; }
PROFILE_ARGS=()
[ -n "${PROFILE:-}" ] && PROFILE_ARGS=(--profile "$PROFILE")
for step in "$@"; do
  echo "=== $step"
  case "$step" in
    gpu-file)
      timeout ${GPU_TESTS_TIMEOUT:-300} python3 -m pytest -m gpu ${GPU_FILE:-tests/gpu} -q -p no:cacheprovider -rf --tb=line ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | tee "$OUT/gpu-file.log" | tail -25 ;;
    tune-each)
      bash bench/tune_each.sh ${TUNE_SHAPES:-bench/tune_heldout.toml} ${TUNE_BUDGET:-60} "$OUT/tune.jsonl" 2>&1 | tail -${TUNE_TAIL:-40} ;;
    skinny)
      timeout ${SKINNY_TIMEOUT:-300} python3 -m bench.skinny_probe --out "$OUT" ${SKINNY_ARGS:-} 2>&1 | tee "$OUT/skinny.txt" | tail -${SKINNY_TAIL:-80} ;;
    tune)
      timeout ${TUNE_TIMEOUT:-400} python3 -m tui.main tune --backend cuda "${PROFILE_ARGS[@]}" --json ${TUNE_ARGS:-} > "$OUT/tune.json" 2> "$OUT/tune.err"; echo "tune rc=$?"
      python3 -m bench.tune_summary "$OUT/tune.json" ${TUNE_TORCH:---torch} 2>&1 | tail -${TUNE_TAIL:-40} ;;
    facts)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
      python3 -c "import cupy, ml_dtypes; p=cupy.cuda.runtime.getDeviceProperties(0); print('L2', p['l2CacheSize'], 'smemOptin', p['sharedMemPerBlockOptin'], 'cupy', cupy.__version__)" ;;
    gpu-tests)
      # -v: a log cut by the timeout still names every test that ran and its outcome
      timeout ${GPU_TESTS_TIMEOUT:-300} python3 -m pytest -m gpu ${GPU_TESTS_FILES:-tests/gpu} -v -p no:cacheprovider ${PYTEST_ARGS:-} ${PYTEST_K:+-k "$PYTEST_K"} 2>&1 | tee "$OUT/gpu-tests.log" | grep -vE " PASSED " | tail -40 ;;
    bench-cli)
      for dt in bf16 fp16 fp32 tf32; do
        tui bench --backend cuda --dtype "$dt" ${CLI_ARGS:-} --json > "$OUT/bench-$dt.json" 2> "$OUT/bench-$dt.err"; echo "$dt rc=$?"
        python3 -c "import json,sys; d=json.load(open('$OUT/bench-$dt.json')); print(d['status'], d['time_ms'], 'TF/s', d['tflops'], 'SOL%', d['sol_pct'], 'score', d['solexec_score'], 'correct', d['correct'], 'hold', d['validity'].get('queue_hold'), 'cluster', d['launch'].get('info', {}).get('cluster')); [print('  ', p['name'], p['timing'] and p['timing']['median_ms'], p['tflops'], p['correct'], p['error']) for p in d['peers']]"
      done ;;
    bench-all)
      # every kernel and dtype through `tui bench`, one summary line each (JSON kept in $OUT)
      python3 -c "from kernels import kernel_names, get_spec; [print(n, d) for n in kernel_names() for d in get_spec(n).dtypes]" |
      while read -r kn dt; do
        tui bench --backend cuda --kernel "$kn" --dtype "$dt" ${CLI_ARGS:-} --json > "$OUT/bench-$kn-$dt.json" 2> "$OUT/bench-$kn-$dt.err"; rc=$?
        python3 -c "import json; d=json.load(open('$OUT/bench-$kn-$dt.json')); b=min((p['timing']['median_ms'] for p in d['peers'] if p['timing'] and p['correct']), default=None); print('$kn $dt rc=$rc', d['status'], 'ms', (d['time_ms'] or {}).get('median'), 'SOL%', d['sol_pct'], 'correct', d['correct'], 'best peer ms', b, 'knobs', d.get('knobs_from'))" 2>&1 | tail -1
      done ;;
    check)
      tui check > "$OUT/check.txt" 2>&1; echo "check rc=$?"; cat "$OUT/check.txt" | tail -60
      tui checklist > "$OUT/checklist.txt" 2>&1; cat "$OUT/checklist.txt" ;;
    bench)
      timeout ${BENCH_TIMEOUT:-300} python3 -m bench.bench ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt" | tail -60 ;;
    calibrate)
      tui calibrate "${PROFILE_ARGS[@]}" > "$OUT/calibrate.txt" 2>&1; echo "calibrate rc=$?"; cat "$OUT/calibrate.txt"
      tui bench --backend cuda --no-peers 2>&1 | grep -E "measured|T_SOL|ours" ;;
    sm90)
      if [ -z "${SM90_ARGS:-}" ]; then echo "sm90: SM90_ARGS names the mode (python -m bench.sm90_gemm --help)"; continue; fi
      OUT="$OUT" timeout ${SM90_TIMEOUT:-300} python3 -m bench.sm90_gemm ${SM90_ARGS} 2>&1 | tail -60 ;;
    ncu)
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      timeout ${NCU_TIMEOUT:-400} "$NCU" --clock-control none -k regex:gemm_residual_sm90 --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
        python3 -m bench.ncu_probe ${NCU_CASES:+--cases "$NCU_CASES"} > "$OUT/ncu.txt" 2>&1; echo "ncu rc=$?"
      grep -E "^[a-z0-9]+-(bf16|fp16|fp32):|SM Frequency|Elapsed Cycles|Duration|SM Active Cycles|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput" "$OUT/ncu.txt" ;;
    ncu-metrics)
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      timeout ${NCU_TIMEOUT:-400} "$NCU" --clock-control none -k "regex:gemm|xmma|sm90|cutlass" --section SpeedOfLight \
        --section LaunchStats --section InstructionStats \
        --metrics gpc__cycles_elapsed.max,lts__t_bytes.sum,dram__bytes.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__cycles_active.avg \
        python3 -m bench.ncu_probe --launches 1 ${NCU_CASES:+--cases "$NCU_CASES"} > "$OUT/ncu-metrics.txt" 2>&1; echo "ncu rc=$?"
      grep -E "^seed|^m[0-9]+-|  [a-z_0-9]+.*\(|SM Frequency|Duration|gpc__cycles|lts__t_bytes|dram__bytes|smsp__inst_executed.sum|lsu_wavefronts|sm__cycles_active|Grid Size|Cluster Size|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Executed Instructions  " "$OUT/ncu-metrics.txt" | head -150 ;;
    ncu-source)
      # the full set with PC sampling, one launch per case; the per-SASS-line stall samples of
      # every profiled kernel as CSV (gzipped), the warp-state and scheduler sections as text
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      timeout ${NCU_TIMEOUT:-300} "$NCU" --clock-control none -k "regex:gemm|nvjet|sm90" --set full -f -o "$OUT/src" \
        python3 -m bench.ncu_probe --launches 1 ${NCU_CASES:+--cases "$NCU_CASES"} > "$OUT/ncu-src.log" 2>&1; echo "ncu rc=$?"
      "$NCU" -i "$OUT/src.ncu-rep" --page source --print-source sass --csv > "$OUT/src-sass.csv" 2> "$OUT/src-sass.err"; echo "source rc=$?"
      "$NCU" -i "$OUT/src.ncu-rep" --page details --section WarpStateStats --section SchedulerStats --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section LaunchStats > "$OUT/src-details.txt" 2>&1
      gzip -f "$OUT/src-sass.csv"; tail -5 "$OUT/ncu-src.log"; head -c 600 "$OUT/src-sass.err"
      python3 -m bench.sass_hot "$OUT/src-sass.csv.gz" --top ${SASS_TOP:-10} | tee "$OUT/src-hot.txt"
      grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps|L2 Cache Throughput|Mem Busy" "$OUT/src-details.txt" | head -80 ;;
    membound-hints)
      OUT="$OUT" timeout ${HINTS_TIMEOUT:-240} python3 -m bench.membound_hints ${HINTS_ARGS:-} 2>&1 | tail -40 ;;
    membound-bulk)
      OUT="$OUT" timeout ${BULK_TIMEOUT:-240} python3 -m bench.membound_bulk ${BULK_ARGS:-} 2>&1 | tail -60 ;;
    energy)
      timeout ${ENERGY_TIMEOUT:-200} python3 -m bench.energy_probe ${ENERGY_ARGS:-} 2>&1 | tail -30 ;;
    ramp)
      OUT="$OUT" timeout ${RAMP_TIMEOUT:-240} python3 -m bench.ramp_probe ${RAMP_ARGS:-} 2>&1 | tail -14 ;;
    swap)
      timeout ${SWAP_TIMEOUT:-300} python3 -m bench.swap_probe ${SWAP_ARGS:-} 2>&1 | tail -30 ;;
    energy-cli)
      for dt in ${ENERGY_DTYPES:-bf16 fp16}; do
        tui bench --backend cuda --dtype "$dt" --no-peers --energy ${ENERGY_S:-2} > "$OUT/energy-cli-$dt.txt" 2>&1; echo "$dt rc=$?"
        grep -E "^(ours|energy)|median" "$OUT/energy-cli-$dt.txt" | head -6
      done ;;
    soak)
      timeout $((${SOAK_S:-60} + 120)) python3 -m tui.main soak --backend cuda "${PROFILE_ARGS[@]}" --duration "${SOAK_S:-60}s" ${SOAK_ARGS:-} --json > "$OUT/soak.json" 2> "$OUT/soak.err"; echo "soak rc=$?"
      python3 -c "import json; d=json.load(open('$OUT/soak.json')); print({k: d.get(k) for k in ('status', 'verdict', 'launches', 'drift_pct', 'median_first_ms', 'median_last_ms', 'verifications', 'failures', 'throttle', 'error')})" 2>&1 | tail -3; tail -5 "$OUT/soak.err" ;;
    tui)
      OUT="$OUT" timeout 150 python3 tests/gpu/tui_flow.py 2>&1 | tail -40 ;;
    *) echo "unknown step $step" ;;
  esac
done
