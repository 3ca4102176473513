#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, right after dev/scripts/device-check.sh
# on the same warm machine (its build-check/ is reused; the copy of the tree is fresh): the
# timings of one lease, one after the other on an idle GPU, at most 8 files in $OUT:
#   cpp-kernels.json   mhc bench kernels at 1, 16, 128 tokens (the graphs' C++ baseline)
#   python-ops.json    bench/python_ops.py: host cost per eager call (2000 a round), graphs
#   fp8-kernels.json   the FP8 rows (boundary and input path, fused against bf16 + group quant)
#   head-kernels.json  the head collapse with and without the final norm
#   head-compile.json  torch.ops.mhc.head against torch.compile of the same math
#   peers.json, torch-compile.json, logs.tar.gz   dev/peers/run.sh (carry .peers and .deps)
# MHC_BENCH_SECONDS: the whole run's deadline (default 480); the peers get what is left.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/mhc-bench-out}
logs=/tmp/mhc-bench-logs
mkdir -p "$OUT" "$logs"
commit=${MHC_COMMIT:-unknown}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
deadline=$((SECONDS + ${MHC_BENCH_SECONDS:-480}))
b=build-check
step() {  # step NAME SECONDS COMMAND...: at most SECONDS, never past the deadline
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then echo "$name skipped (no time left)" >>"$logs/steps.txt"; return; fi
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s (limit ${limit}s)" >>"$logs/steps.txt"
}
[ -x $b/mhc ] || { echo "device-bench: $b/mhc missing: run dev/scripts/device-check.sh first"; exit 2; }
cp $b/python/_C*.so $b/python/_torch_ops*.so python/mhc/
tokens=1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192
step cpp_bench 60 $b/mhc bench kernels --tokens 1,16,128 --json "$OUT/cpp-kernels.json"
step py_bench 130 python3 bench/python_ops.py --cpp-json "$OUT/cpp-kernels.json" \
  --out "$OUT/python-ops.json" --commit "$commit" --driver "$driver" --tokens 1,16,128 \
  --rounds 3 --calls 2000 --modes no_grad,inference_mode
step fp8 60 $b/mhc bench kernels --preset dsv41-flash --tokens $tokens --only FP8 \
  --json "$OUT/fp8-kernels.json"
step head 40 $b/mhc bench kernels --preset dsv41-flash --tokens 1,2,4,8,16,4096,8192 \
  --only head --json "$OUT/head-kernels.json"
step head_compile 60 python3 bench/head_compile.py --hidden 5120 --out "$OUT/head-compile.json" \
  --commit "$commit" --driver "$driver" \
  --cpp-json "$OUT/head-kernels.json"
# The side-by-side benchmark device-check.sh linked (with .peers carried) runs as it is.
if [ -x $b/dev/peers/mhc_bench_peers ] && [ -d .peers ]; then
  mkdir -p .peers/bin && cp $b/dev/peers/mhc_bench_peers .peers/bin/ && echo "$commit" >.peers/bin/COMMIT
fi
left=$((deadline - SECONDS - 10))
[ "$left" -gt 120 ] && PEERS_SECONDS=$left MHC_COMMIT=$commit bash dev/peers/run.sh \
  >"$logs/peers.log" 2>&1
echo "peers: $(tail -1 "$logs/peers.log")" >>"$logs/steps.txt"
for f in "$logs"/*.log; do tail -c 20000 "$f" >"$f.tail" && mv "$f.tail" "$f"; done
[ -f "$OUT/logs.tar.gz" ] && mv "$OUT/logs.tar.gz" "$logs/peers-logs.tar.gz"
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-bench-logs
grep -E "^(op|post|pre|coeff|boundary|join|hc_|torch)" "$logs/py_bench.log" | tail -24
grep -E "FP8|M=" "$logs/fp8.log" | tail -30
tail -12 "$logs/head_compile.log"
sed -n '/== mhc \/ fastest/,$p' "$logs/peers.log" | head -40
cat "$logs/steps.txt"
