// The benchmarks in a build without the CUDA backend: they exist, so the CLI is the same, and say
// why they cannot run.
#include "mhc/bench/kernels.hpp"
#include "mhc/bench/overlap.hpp"
#include "mhc/core/error.hpp"

namespace mhc::bench {

nlohmann::json bench_kernels(const KernelBenchOptions&) {
  throw Error("mhc bench kernels needs the CUDA backend, and this build has none");
}

nlohmann::json bench_overlap(const OverlapOptions&) {
  throw Error("mhc bench overlap needs the CUDA backend; this build has none");
}

std::vector<std::vector<nlohmann::json>> overlap_rounds(const OverlapOptions&, const ModelWeights&,
                                                        int) {
  throw Error("the overlap measurement needs the CUDA backend; this build has none");
}

}  // namespace mhc::bench
