// DeepGEMM's sm90_tf32_hc_prenorm_gemm (deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh, fetched
// into .peers/ by fetch-peers.sh), instantiated ahead of time with the template arguments its JIT
// (csrc/jit_kernels/impls/sm90_tf32_hc_prenorm_gemm.hpp) picks for N = 24, and launched as that
// host code launches it: the same TMA descriptors, grid, block and shared memory, no PDL
// (DeepGEMM's default).
#include <cuda.h>

#include <deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh>
#include <stdexcept>
#include <string>

#include "peers.hpp"

namespace peers {
namespace {

constexpr uint32_t kN = 24, kBlockM = 64, kBlockN = 32, kBlockK = 64;
constexpr uint32_t kSwizzleCD = 128;  // get_swizzle_mode(block_n = 32, sizeof(float))
constexpr uint32_t kStages = 12;      // DeepGEMM's stage loop for these blocks
constexpr uint32_t kMathThreads = 128, kTmaThreads = 128;
constexpr int kSmem = 232448;  // SM90ArchSpec::smem_capacity, as DeepGEMM launches it

template <uint32_t K, uint32_t S>
constexpr auto kernel =
    &deep_gemm::sm90_tf32_hc_prenorm_gemm_impl<kN, K, kBlockM, kBlockN, kBlockK, S, kSwizzleCD,
                                               kStages, kMathThreads, kTmaThreads>;

using Kernel = void (*)(uint32_t, cute::TmaDescriptor, cute::TmaDescriptor, cute::TmaDescriptor,
                        float*);

template <uint32_t K>
Kernel pick_split(int splits) {
  switch (splits) {
    case 1:
      return kernel<K, 1>;
    case 2:
      return kernel<K, 2>;
    case 4:
      return kernel<K, 4>;
    case 8:
      return kernel<K, 8>;
    case 16:
      return kernel<K, 16>;
    default:
      return nullptr;
  }
}

Kernel pick(int64_t k, int splits) {
  switch (k) {
    case 16384:
      return pick_split<16384>(splits);
    case 20480:
      return pick_split<20480>(splits);
    case 28672:
      return pick_split<28672>(splits);
    default:
      return nullptr;
  }
}

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                              const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                              const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeFn encode_fn() {
  static EncodeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      throw std::runtime_error("DeepGEMM peer: cuTensorMapEncodeTiled not found");
    return reinterpret_cast<EncodeFn>(f);
  }();
  return fn;
}

// make_tma_2d_desc / make_tma_3d_desc of DeepGEMM's runtime_utils.hpp: dims[0] innermost,
// strides in bytes of dims 1.., box inner = swizzle / element size, 128B swizzle, L2 256B.
CUtensorMap encode(CUtensorMapDataType type, int rank, void* data, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box) {
  CUtensorMap map;
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r =
      encode_fn()(&map, type, rank, data, dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("DeepGEMM peer: cuTensorMapEncodeTiled failed (" +
                             std::to_string(int(r)) + ")");
  return map;
}

}  // namespace

bool deepgemm_prenorm_supported(int64_t k, int splits) { return pick(k, splits) != nullptr; }

void deepgemm_prenorm(const void* a, const float* b, float* d, float* sqr_sum, int64_t m, int64_t k,
                      int splits, cudaStream_t stream) {
  const Kernel kern = pick(k, splits);
  if (kern == nullptr) throw std::runtime_error("DeepGEMM peer: no instance for this K, splits");
  const cuuint64_t a_dims[2] = {cuuint64_t(k), cuuint64_t(m)}, a_strides[1] = {cuuint64_t(k) * 2};
  const cuuint32_t a_box[2] = {128 / 2, kBlockM};
  const cuuint64_t b_dims[2] = {cuuint64_t(k), kN}, b_strides[1] = {cuuint64_t(k) * 4};
  const cuuint32_t b_box[2] = {128 / 4, kBlockN};
  const CUtensorMap ta =
      encode(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(a), a_dims, a_strides, a_box);
  const CUtensorMap tb =
      encode(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, 2, const_cast<float*>(b), b_dims, b_strides, b_box);
  CUtensorMap td;
  if (splits == 1) {
    const cuuint64_t dims[2] = {kN, cuuint64_t(m)}, strides[1] = {kN * 4};
    const cuuint32_t box[2] = {kSwizzleCD / 4, kBlockM};
    td = encode(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dims, strides, box);
  } else {
    const cuuint64_t dims[3] = {kN, cuuint64_t(m), cuuint64_t(splits)},
                     strides[2] = {kN * 4, cuuint64_t(m) * kN * 4};
    const cuuint32_t box[3] = {kSwizzleCD / 4, kBlockM, 1};
    td = encode(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, d, dims, strides, box);
  }
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  const unsigned grid = unsigned(splits) * unsigned((m + kBlockM - 1) / kBlockM);
  kern<<<grid, kMathThreads + kTmaThreads, kSmem, stream>>>(uint32_t(m), ta, tb, td, sqr_sum);
}

}  // namespace peers
