#include <algorithm>
#include <stdexcept>

#include "peers_timing.hpp"

namespace peers {
namespace {

__device__ __forceinline__ float hash_uniform(uint64_t i, uint64_t seed) {
  uint64_t z = i + seed * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(z >> 40) * (1.f / 16777216.f);
}

__global__ void fill_bf16_kernel(uint16_t* out, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float f = 2.f * hash_uniform(i, seed) - 1.f;
    uint32_t u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (finite inputs only)
    out[i] = uint16_t(u >> 16);
  }
}

__global__ void fill_f32_kernel(float* out, int64_t count, float lo, float hi, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = lo + (hi - lo) * hash_uniform(i, seed);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

void fill_bf16(void* out, int64_t count, uint64_t seed, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<uint16_t*>(out), count, seed);
  check_cuda(cudaGetLastError(), "fill_bf16");
}

void fill_f32(float* out, int64_t count, float lo, float hi, uint64_t seed, cudaStream_t s) {
  fill_f32_kernel<<<256, 256, 0, s>>>(out, count, lo, hi, seed);
  check_cuda(cudaGetLastError(), "fill_f32");
}

int rotation_sets(int64_t set_bytes, int64_t l2_bytes) {
  const int64_t n = (3 * l2_bytes + set_bytes - 1) / std::max<int64_t>(set_bytes, 1);
  return int(std::clamp<int64_t>(n, 1, 48));
}

std::vector<Timed> time_interleaved(std::vector<Item>& items, int sets, cudaStream_t stream,
                                    const TimingOptions& o) {
  const size_t n = items.size();
  std::vector<std::vector<cudaGraphExec_t>> execs(n);
  for (size_t i = 0; i < n; ++i) {
    if (!items[i].timed) continue;
    for (int s = 0; s < sets; ++s) {
      cudaGraph_t g = nullptr;
      check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                 items[i].name + ": begin capture");
      try {
        items[i].enqueue(s, stream);
      } catch (...) {
        cudaStreamEndCapture(stream, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      check_cuda(cudaStreamEndCapture(stream, &g), items[i].name + ": capture");
      cudaGraphExec_t e = nullptr;
      check_cuda(cudaGraphInstantiate(&e, g, 0), items[i].name + ": instantiate");
      cudaGraphDestroy(g);
      execs[i].push_back(e);
    }
  }
  std::vector<cudaEvent_t> ev(size_t(o.reps) + 1);
  for (auto& e : ev) check_cuda(cudaEventCreate(&e), "event");
  std::vector<Timed> out(n);
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + size_t(r)) % n;
      if (!items[i].timed) continue;
      const int warm = std::max(o.warmup, sets);
      for (int w = 0; w < warm; ++w) cudaGraphLaunch(execs[i][size_t(w % sets)], stream);
      cudaEventRecord(ev[0], stream);
      for (int q = 0; q < o.reps; ++q) {
        cudaGraphLaunch(execs[i][size_t((warm + q) % sets)], stream);
        cudaEventRecord(ev[size_t(q) + 1], stream);
      }
      check_cuda(cudaStreamSynchronize(stream), items[i].name + ": replay");
      std::vector<double> us(size_t(o.reps));
      for (int q = 0; q < o.reps; ++q) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[size_t(q)], ev[size_t(q) + 1]);
        us[size_t(q)] = 1000.0 * ms;
      }
      const double lo = *std::min_element(us.begin(), us.end());
      out[i].min_us = out[i].round_us.empty() ? lo : std::min(out[i].min_us, lo);
      out[i].round_us.push_back(median(us));
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  for (auto& v : execs)
    for (auto e : v) cudaGraphExecDestroy(e);
  for (auto& t : out) t.median_us = median(t.round_us);
  return out;
}

}  // namespace peers
