#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <fmt/core.h>

#include <vector>

#include "mhc/bench/decoder_standin.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"

#define MHC_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                          \
    cublasStatus_t mhc_status_ = (call);                                                        \
    if (mhc_status_ != CUBLAS_STATUS_SUCCESS)                                                   \
      throw ::mhc::Error(fmt::format("cuBLAS error {} in {} at {}:{}", int(mhc_status_), #call, \
                                     __FILE__, __LINE__));                                      \
  } while (0)

namespace mhc::cuda {
namespace {

// A [rows, cols] row-major slice, at (row0, col0), of a matrix with `ld` columns.
struct Slice {
  int64_t rows, cols, ld, row0, col0;
};

// Uniform in [-scale, scale) from a hash of the element's index in the FULL matrix: deterministic,
// cheap, never zero-filled, and a TP rank's slice holds exactly the TP=1 values (TP=1 is the
// slice covering everything, so its weights are what they were before sharding existed).
__global__ void fill_uniform_bf16(__nv_bfloat16* out, Slice s, uint32_t seed, float scale) {
  const int64_t count = s.rows * s.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t full_index = (s.row0 + i / s.cols) * s.ld + s.col0 + i % s.cols;
    uint32_t h = uint32_t(full_index) * 0x9e3779b1u ^ seed;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    const float u = float(h >> 8) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

int round_up(int v, int to) { return (v + to - 1) / to * to; }

}  // namespace

StandinWidths StandinWidths::for_params(const MhcParams& p, StandinWidths requested) {
  StandinWidths w;
  w.attention = requested.attention > 0 ? requested.attention : p.hidden;
  w.ffn = requested.ffn > 0 ? requested.ffn : round_up(p.hidden * 5 / 4, 64);
  return w;
}

int64_t StandinWidths::weight_bytes_per_layer(const MhcParams& p) const {
  return 4 * int64_t(p.hidden) * (int64_t(attention) + int64_t(ffn));
}

struct DecoderStandin::Impl {
  MhcParams p;
  int64_t max_tokens;
  StandinWidths widths;  // full widths
  StandinShard shard;
  cublasHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> cublas_workspace;
  std::vector<DeviceBuffer<Bf16>> w_in, w_out;  // per site: [C, W/tp] and [W/tp, C]
  DeviceBuffer<Bf16> hidden;                    // [max_tokens, max local width]

  int full_width(int site) const { return site % 2 == 0 ? widths.attention : widths.ffn; }
  ShardRange range(int site) const {
    return shard_range(full_width(site), shard.world, shard.rank,
                       site % 2 == 0 ? "attention stand-in" : "FFN stand-in");
  }
  int width(int site) const { return range(site).count; }
  void fill(DeviceBuffer<Bf16>& w, Slice slice, uint32_t seed, float scale);
  void add_site_weights(int site);
};

void DecoderStandin::Impl::fill(DeviceBuffer<Bf16>& w, Slice slice, uint32_t seed, float scale) {
  w = DeviceBuffer<Bf16>(size_t(slice.rows * slice.cols));
  fill_uniform_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(w.get()), slice, seed, scale);
  MHC_CUDA_CHECK(cudaGetLastError());
}

// Column-parallel first GEMM: this rank's columns of the [C, W] matrix. Row-parallel second GEMM:
// the same range as rows of the [W, C] matrix.
void DecoderStandin::Impl::add_site_weights(int s) {
  const ShardRange r = range(s);
  const int64_t c = p.hidden, full = full_width(s);
  fill(w_in.emplace_back(), Slice{c, r.count, full, 0, r.offset}, uint32_t(2 * s),
       1.7f / std::sqrt(float(c)));
  fill(w_out.emplace_back(), Slice{r.count, c, c, r.offset, 0}, uint32_t(2 * s + 1),
       1.7f / std::sqrt(float(full)));
}

DecoderStandin::DecoderStandin(const MhcParams& p, int64_t max_tokens, StandinWidths widths,
                               StandinShard shard)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.p = p;
  d.max_tokens = max_tokens;
  d.widths = StandinWidths::for_params(p, widths);
  d.shard = shard;
  const StandinShardPlan plan = plan_standin_shards(shard.world, d.widths.attention, d.widths.ffn);
  d.range(0);  // also checks the rank
  MHC_CUBLAS_CHECK(cublasCreate(&d.handle));
  // A fixed workspace, so cuBLAS never allocates while a forward is being captured.
  d.cublas_workspace = DeviceBuffer<unsigned char>(size_t(32) << 20);
  MHC_CUBLAS_CHECK(
      cublasSetWorkspace(d.handle, d.cublas_workspace.get(), d.cublas_workspace.bytes()));
  for (int s = 0; s < p.sites(); ++s) d.add_site_weights(s);
  d.hidden = DeviceBuffer<Bf16>(size_t(max_tokens) *
                                size_t(std::max(plan.attention_local, plan.ffn_local)));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

DecoderStandin::~DecoderStandin() {
  if (impl_ && impl_->handle) cublasDestroy(impl_->handle);
}

const StandinWidths& DecoderStandin::widths() const { return impl_->widths; }
const StandinShard& DecoderStandin::shard() const { return impl_->shard; }

void DecoderStandin::operator()(int site, int64_t tokens, const Bf16* layer_input, Bf16* out,
                                cudaStream_t stream) const {
  const Impl& d = *impl_;
  if (tokens > d.max_tokens) {
    throw Error(fmt::format("DecoderStandin: {} tokens, built for {}", tokens, d.max_tokens));
  }
  if (tokens == 0) return;
  const int c = d.p.hidden, w = d.width(site);
  const float one = 1.0f, zero = 0.0f;
  MHC_CUBLAS_CHECK(cublasSetStream(d.handle, stream));
  // Row-major [M, C] x [C, W] = [M, W] is column-major W^T-shaped: C_cm[W, M] = B_cm[W, C] A_cm[C,
  // M].
  MHC_CUBLAS_CHECK(cublasGemmEx(d.handle, CUBLAS_OP_N, CUBLAS_OP_N, w, int(tokens), c, &one,
                                d.w_in[size_t(site)].get(), CUDA_R_16BF, w, layer_input,
                                CUDA_R_16BF, c, &zero, d.hidden.get(), CUDA_R_16BF, w,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  MHC_CUBLAS_CHECK(cublasGemmEx(d.handle, CUBLAS_OP_N, CUBLAS_OP_N, c, int(tokens), w, &one,
                                d.w_out[size_t(site)].get(), CUDA_R_16BF, c, d.hidden.get(),
                                CUDA_R_16BF, w, &zero, out, CUDA_R_16BF, c, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

}  // namespace mhc::cuda
