// Queries that launch nothing (has_cuda, limits, workspace_bytes, supports_overlap) and the
// kernel configuration (configure, kernel_config).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>
#include <tuple>

#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "arrays.hpp"
#include "bindings.hpp"
#include "launch.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/io/limits.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace mhc::python {

namespace {

#if MHC_WITH_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

// The stream counts this build holds CUDA kernels for: n = 2 only with -DMHC_KERNELS_N2=ON (no
// DeepSeek preset has n = 2; mhc_cuda's public define); none without the CUDA backend. A CUDA
// call with an n of cuda_streams that is not here passes the checks and is refused at launch,
// naming the option.
nb::tuple cuda_kernel_streams() {
#if MHC_WITH_CUDA && defined(MHC_KERNELS_N2)
  return nb::make_tuple(2, 4);
#elif MHC_WITH_CUDA
  return nb::make_tuple(4);
#else
  return nb::make_tuple();
#endif
}

bool has_cuda() {
#if MHC_WITH_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return false;
#endif
}

int64_t workspace_bytes(int64_t hidden, int64_t n, int64_t max_tokens) {
  const MhcParams p = make_params(hidden, n, {});
  if (max_tokens < 0) fail("max_tokens: must be >= 0, got " + std::to_string(max_tokens));
  return workspace_layout(p, max_tokens).bytes;
}

std::tuple<bool, std::string, std::string> supports_overlap(int arch_major, int arch_minor,
                                                            int hidden, int n, int64_t tokens,
                                                            const std::string& mode, int tp,
                                                            const std::string& kernel_config) {
  try {
    DispatchInputs in;
    in.capability = {arch_major, arch_minor};
    in.prenorm_gemm_available = kBuiltWithCuda;
    in.hidden = hidden;
    in.n = n;
    in.mode = parse_exec_mode(mode);
    in.tokens = tokens;
    const TensorParallel group(tp);
    in.tp = &group;
    in.config = KernelConfig::parse(kernel_config);
    const DispatchDecision d = decide(in);
    return {d.overlap, d.reason_code, d.reason};
  } catch (const Error& e) {
    fail(e.what());
  }
}

// The limits the torch layer checks before any kernel runs (python/mhc/_checks.py), from the
// constants the library's own checks use.
nb::dict limits() {
  nb::dict d;
  d["max_streams"] = kMaxStreams;
  d["hidden_multiple"] = kHiddenMultiple;
  d["max_hidden"] = kMaxHidden;
  d["max_sinkhorn_iters"] = io::kMaxSinkhornIters;
  d["cuda_streams"] = nb::make_tuple(kCudaStreams[0], kCudaStreams[1]);
  d["cuda_kernel_streams"] = cuda_kernel_streams();
  d["cuda_hidden_multiple"] = kCudaHiddenMultiple;
  d["prenorm_block_k"] = kPrenormSplitBlockK;
  nb::dict ranges;  // name -> (lo, hi): mhc::param_ranges, the fp32 arithmetic each feeds
  for (const ParamRange& r : param_ranges()) ranges[r.name] = nb::make_tuple(r.lo, r.hi);
  d["param_ranges"] = ranges;
  return d;
}

}  // namespace

void bind_info(nb::module_& m) {
  m.def(
      "built_with_cuda", [] { return kBuiltWithCuda; },
      "Whether the extension holds the CUDA kernels (whatever GPU this machine has).");
  m.def("has_cuda", &has_cuda,
        "Whether the extension was built with the CUDA backend and a GPU is visible.");
  m.def(
      "limits", &limits,
      "The shape and parameter limits checked before any kernel runs: max_streams (n in "
      "1..max_streams), hidden_multiple and max_hidden (C), max_sinkhorn_iters, and the CUDA "
      "kernels' cuda_streams and cuda_hidden_multiple; cuda_kernel_streams: the n this build "
      "holds CUDA kernels for (n = 2 only with -DMHC_KERNELS_N2=ON); prenorm_gemm's K is a "
      "multiple of prenorm_block_k; param_ranges: name -> (lo, hi) of each epsilon and post_mult.");
  m.def("workspace_bytes", &workspace_bytes, "hidden"_a, "n"_a, "max_tokens"_a,
        "Bytes of the uint8 workspace coefficients needs for up to max_tokens tokens (zero-fill "
        "it once; the kernels leave it ready for the next call on the same stream).");
  m.def(
      "configure", [](const std::string& json) { launch::configure(json); }, "kernel_config"_a,
      "Sets the kernel configuration of this module's CUDA calls (JSON as `mhc run "
      "--kernel-config`, \"\" for the defaults); mhc.configure sets it here and for the torch "
      "ops alike. Raises RuntimeError naming a bad key or value.");
  m.def("kernel_config", &launch::config_json, "The kernel configuration in use (canonical JSON).");
  m.def("supports_overlap", &supports_overlap, "arch_major"_a, "arch_minor"_a, "hidden"_a, "n"_a,
        "tokens"_a, "mode"_a, "tp"_a, "kernel_config"_a = "",
        "The C++ dispatch policy: (overlap, reason_code, explanation). mode: eager, piecewise or "
        "full; kernel_config: JSON as `mhc run --kernel-config`.");
}

}  // namespace mhc::python
