// What the host launchers of src/cuda share (kernels.cu, boundary.cu): argument checks whose
// messages are formatted only on failure, and the bf16 pointers' bit views. A .cuh: it needs
// the row kernels' limits, so only CUDA translation units include it.
#pragma once
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "mhc/core/bf16.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/input_path.cuh"  // row_kernel_max_hidden, require_aligned16
#include "mhc/cuda/kernels.hpp"

namespace mhc::cuda::detail {

// fmt's compile-time format checks are consteval, which nvcc's front end rejects here; the
// messages are formatted at run time instead.
template <typename... Args>
std::string msg(std::string_view format, const Args&... args) {
  return fmt::vformat(format, fmt::make_format_args(args...));
}

// A check whose message is formatted only when it fails: the launchers sit on the forward path,
// where nothing may allocate (and a formatted std::string would).
template <typename... Args>
void require_that(bool ok, std::string_view format, const Args&... args) {
  if (!ok) throw Error(msg(format, args...));
}

// The n = 2 kernels are built only with -DMHC_KERNELS_N2=ON (no DeepSeek preset has n = 2; the
// default build holds n = 4 alone). Without them every n = 2 launch is refused by check_shape, and
// the dispatch below compiles its n = 2 branches out (#if MHC_KERNELS_N2).
// MHC_N2_LAUNCH(call) is an n = 2 launch (a cudaError_t) where they were built, else
// cudaErrorNotSupported, so that a path that skipped check_shape still never runs them.
#if defined(MHC_KERNELS_N2)
inline constexpr bool kKernelsN2 = true;
#define MHC_N2_LAUNCH(...) (__VA_ARGS__)
#else
inline constexpr bool kKernelsN2 = false;
#define MHC_N2_LAUNCH(...) cudaErrorNotSupported
#endif

inline const uint16_t* bits(const Bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
inline uint16_t* bits(Bf16* p) { return reinterpret_cast<uint16_t*>(p); }

// Shapes every kernel family supports: n in {2, 4} (NMIX a multiple of 8, at most 32) and C a
// multiple of 64 (whole 16-byte vectors and whole 32-wide K chunks per stream).
inline void check_shape(const MhcParams& p, int64_t tokens, const char* what) {
  require_that(p.n == 2 || p.n == 4,
               "{}: n={} is not supported by the CUDA kernels (n must be 2 or 4)", what, p.n);
  require_that(p.n != 2 || kKernelsN2,
               "{}: the n = 2 kernels were not built; configure with -DMHC_KERNELS_N2=ON", what);
  require_that(p.hidden > 0 && p.hidden % 64 == 0,
               "{}: hidden size C={} must be a positive multiple of 64", what, p.hidden);
  // One CTA of 1024 threads per token; a device's own limit (the row kernels' registers cap a
  // CTA's threads: KernelPlan::row_kernels_max_hidden) is checked where the launch is resolved
  // (KernelPlan::tuning) and where a workspace is made.
  require_that(p.hidden <= row_kernel_max_hidden(),
               "{}: hidden size C={} is above the kernels' limit {} (the row kernels run one CTA "
               "of C / 32 threads per token)",
               what, p.hidden, row_kernel_max_hidden());
  require_that(tokens >= 0 && tokens <= INT32_MAX, "{}: token count {} out of range", what, tokens);
}

inline void check_ptr(const void* ptr, const char* name, const char* what) {
  require_that(ptr != nullptr, "{}: {} is null", what, name);
  require_aligned16(ptr, name);
}

// The raw launchers also answer cudaErrorInvalidValue for arguments outside their kernel's
// preconditions (their *_args_valid), which the checks above should have caught with a message of
// their own: the error then names them, so that such a gap is found where it is.
inline void check_launch(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw Error(msg("{}: CUDA launch failed: {} ({}){}", what, cudaGetErrorName(err),
                    cudaGetErrorString(err),
                    err == cudaErrorInvalidValue
                        ? "; the raw launcher also returns this for arguments outside its "
                          "kernel's preconditions (its *_args_valid in mhc/cuda/)"
                        : ""));
  }
}

}  // namespace mhc::cuda::detail
