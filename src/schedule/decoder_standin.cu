#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <fmt/core.h>

#include <vector>

#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/decoder_standin.hpp"

#define MHC_CUBLAS_CHECK(call)                                                             \
  do {                                                                                     \
    cublasStatus_t mhc_status_ = (call);                                                   \
    if (mhc_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      throw ::mhc::Error(fmt::format("cuBLAS error {} in {} at {}:{}", int(mhc_status_), #call, \
                                     __FILE__, __LINE__));                                 \
  } while (0)

namespace mhc::cuda {
namespace {

// Uniform in [-scale, scale) from a hash of the index: deterministic, cheap, never zero-filled.
__global__ void fill_uniform_bf16(__nv_bfloat16* out, int64_t count, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b1u ^ seed;
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
  StandinWidths widths;
  cublasHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> cublas_workspace;
  std::vector<DeviceBuffer<Bf16>> w_in, w_out;  // per site: [C, W] and [W, C]
  DeviceBuffer<Bf16> hidden;                    // [max_tokens, max width]

  int width(int site) const { return site % 2 == 0 ? widths.attention : widths.ffn; }
};

DecoderStandin::DecoderStandin(const MhcParams& p, int64_t max_tokens, StandinWidths widths)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.p = p;
  d.max_tokens = max_tokens;
  d.widths = StandinWidths::for_params(p, widths);
  MHC_CUBLAS_CHECK(cublasCreate(&d.handle));
  // A fixed workspace, so cuBLAS never allocates while a forward is being captured.
  d.cublas_workspace = DeviceBuffer<unsigned char>(size_t(32) << 20);
  MHC_CUBLAS_CHECK(cublasSetWorkspace(d.handle, d.cublas_workspace.get(), d.cublas_workspace.bytes()));
  for (int s = 0; s < p.sites(); ++s) {
    const int64_t count = int64_t(p.hidden) * d.width(s);
    for (auto* list : {&d.w_in, &d.w_out}) {
      list->emplace_back(size_t(count));
      const float scale = 1.7f / std::sqrt(float(list == &d.w_in ? p.hidden : d.width(s)));
      fill_uniform_bf16<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(list->back().get()), count,
                                       uint32_t(2 * s + (list == &d.w_out)), scale);
      MHC_CUDA_CHECK(cudaGetLastError());
    }
  }
  d.hidden = DeviceBuffer<Bf16>(size_t(max_tokens) * size_t(std::max(d.widths.attention, d.widths.ffn)));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

DecoderStandin::~DecoderStandin() {
  if (impl_ && impl_->handle) cublasDestroy(impl_->handle);
}

const StandinWidths& DecoderStandin::widths() const { return impl_->widths; }

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
  // Row-major [M, C] x [C, W] = [M, W] is column-major W^T-shaped: C_cm[W, M] = B_cm[W, C] A_cm[C, M].
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
