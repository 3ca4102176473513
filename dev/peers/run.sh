#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, in one call: builds mhc's library and the
# side-by-side benchmark against the peers' kernels compiled HERE (.peers/build/libpeers.a, from
# fetch-peers.sh + build-peers.sh; rebuilt there only if missing), compiles the torch.compile
# boundary for every shape meanwhile, then runs bench_peers (checks, then timing) and, after it,
# the torch.compile timing, and prints the summary table last. Carry .peers and .deps.
# Results in $OUT: peers.json, torch-compile.json, logs.tar.gz.
# Environment: PEERS_SECONDS (default 400) the whole call's budget; PEERS_TOKENS, PEERS_HIDDEN
# (default all shapes); PEERS_ROUNDS, PEERS_REPS; MHC_COMMIT (default git's HEAD); PEERS_TORCH=0
# skips torch.compile, PEERS_TORCH_TOKENS its token counts, PEERS_TORCH_COMPILE_SECONDS (default
# 200) when it stops starting compiles (the shapes left are reported as not compiled).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/peers-out}
logs=/tmp/peers-logs
mkdir -p "$OUT" "$logs"
start=$SECONDS
torch_pids=()
budget=${PEERS_SECONDS:-400}
left() { echo $((budget - (SECONDS - start))); }
tokens=${PEERS_TOKENS:-1,2,4,8,16,64,128,1024,4096,8192}
hidden=${PEERS_HIDDEN:-4096,5120,7168}
commit=${MHC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
finish() {
  tar czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null
  echo "== steps"; cat "$logs/steps.txt"
}
fail() {  # fail STEP LOG: the step's last lines, then stop
  echo "run.sh: $1 FAILED; the last lines of $2:"
  tail -40 "$2"
  echo "$1 FAILED" >>"$logs/steps.txt"
  for p in "${torch_pids[@]}"; do kill "$p" 2>/dev/null; done
  finish
  exit 1
}
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), driver $driver, commit $commit" \
  | tee "$logs/steps.txt"

for f in .peers/VERSIONS .peers/lib/libtvm_ffi.so .peers/src/flashinfer/csrc/mhc/mhc_post.cu; do
  [ -f "$f" ] || { echo "run.sh: $f missing: carry .peers (dev/peers/fetch-peers.sh HERE)"; exit 2; }
done
if [ ! -f .peers/build/libpeers.a ]; then
  bash dev/peers/build-peers.sh >"$logs/build-peers.log" 2>&1 || fail build-peers "$logs/build-peers.log"
fi

# torch.compile's compiles overlap the build, one process per hidden size (PEERS_TORCH=0: none);
# the benchmark starts when they are done (a busy CPU would slow its graph launches), and the
# processes time their compiled shapes one after the other after it.
rm -f /tmp/peers-go-* /tmp/peers-compiled-*
if [ "${PEERS_TORCH:-1}" != 0 ]; then
  for c in ${hidden//,/ }; do
    python3 dev/peers/torch_compile.py --tokens "${PEERS_TORCH_TOKENS:-$tokens}" --hidden "$c" \
      --go "/tmp/peers-go-$c" --compiled "/tmp/peers-compiled-$c" \
      --deadline "${PEERS_TORCH_COMPILE_SECONDS:-200}" --out "$logs/torch-compile-$c.json" \
      >"$logs/torch-compile-$c.log" 2>&1 &
    torch_pids+=($!)
  done
fi
torch_compiling() {  # true while a torch.compile process is alive and not yet compiled
  local i=0
  for c in ${hidden//,/ }; do
    kill -0 "${torch_pids[$i]}" 2>/dev/null && [ ! -f "/tmp/peers-compiled-$c" ] && return 0
    i=$((i + 1))
  done
  return 1
}

# A binary built HERE (build-peers.sh --bench: .peers/bin, with the commit it was built at) is
# run as it is; else it is built now (PEERS_REBUILD=1: always).
bench=.peers/bin/mhc_bench_peers
if [ -x "$bench" ] && [ "${PEERS_REBUILD:-0}" = 0 ]; then
  commit=$(cat .peers/bin/COMMIT)
  echo "prebuilt $bench (commit $commit)" >>"$logs/steps.txt"
else
  bench=build-peers/dev/peers/mhc_bench_peers
  t0=$SECONDS
  env CXX=/usr/bin/g++ CC=/usr/bin/gcc cmake -S . -B build-peers -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ -DMHC_CUDA=ON \
    -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= -DMHC_NCCL=OFF -DMHC_LAB=ON -DMHC_CLI=OFF \
    -DBUILD_TESTING=OFF -DMHC_PYTHON=OFF -DMHC_DEPS_DIR="$PWD/.deps" -DMHC_PEERS_DIR="$PWD/.peers" \
    >"$logs/configure.log" 2>&1 || fail configure "$logs/configure.log"
  timeout $(( $(left) - 60 )) cmake --build build-peers -j "$(nproc)" --target mhc_bench_peers \
    >"$logs/build.log" 2>&1 || fail build "$logs/build.log"
  echo "build ok $((SECONDS - t0))s" >>"$logs/steps.txt"
fi

t0=$SECONDS
while [ ${#torch_pids[@]} -gt 0 ] && torch_compiling && [ "$(left)" -gt 120 ]; do sleep 1; done
echo "waited for torch.compile's compiles $((SECONDS - t0))s" >>"$logs/steps.txt"
t0=$SECONDS
LD_LIBRARY_PATH=$PWD/.peers/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  timeout $(( $(left) - 25 )) "$bench" --tokens "$tokens" \
  --hidden "$hidden" --rounds "${PEERS_ROUNDS:-5}" --reps "${PEERS_REPS:-30}" \
  --json "$OUT/peers.json" --commit "$commit" --driver "$driver" --versions .peers/VERSIONS \
  >"$logs/bench.log" 2>&1
rc=$?
echo "bench rc=$rc $((SECONDS - t0))s" >>"$logs/steps.txt"
[ "$rc" != 0 ] && { echo "run.sh: the benchmark ended with rc=$rc; the last lines of its log:"; tail -25 "$logs/bench.log"; }
grep -E "WRONG|rel .* > |ERROR|lost" "$logs/bench.log" | head -20

i=0
for c in ${hidden//,/ }; do
  [ ${#torch_pids[@]} -gt 0 ] || break
  pid=${torch_pids[$i]}
  i=$((i + 1))
  t0=$SECONDS
  touch "/tmp/peers-go-$c"
  while kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 8 ]; do sleep 1; done
  kill "$pid" 2>/dev/null && echo "torch.compile C=$c: stopped at the deadline" >>"$logs/steps.txt"
  wait "$pid" 2>/dev/null
  echo "torch.compile C=$c timing $((SECONDS - t0))s; $(tail -1 "$logs/torch-compile-$c.log")" \
    >>"$logs/steps.txt"
done
python3 dev/peers/summary.py --merge "$OUT/torch-compile.json" "$logs"/torch-compile-*.json \
  2>>"$logs/steps.txt"

finish
echo "== mhc / fastest correct peer"
python3 dev/peers/summary.py "$OUT/peers.json" "$OUT/torch-compile.json"
