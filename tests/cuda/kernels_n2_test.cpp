// The n = 2 kernels are a build option (-DMHC_KERNELS_N2, off by default: no DeepSeek preset has
// n = 2). Where they were not built, an n = 2 site is refused before anything is allocated, with
// a message that names the option; where they were, the other GPU tests run their n = 2 cases.
#include <gtest/gtest.h>

#include <string>

#include "cpu/test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc {
namespace {

#if !defined(MHC_KERNELS_N2)
TEST(KernelsN2, RefusedWhereNotBuilt) {
  const MhcParams p = test::small_params(2, 4096);
  try {
    cuda::SiteWorkspace ws(p, 16, 1);
    FAIL() << "an n = 2 workspace was accepted by a build without the n = 2 kernels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("configure with -DMHC_KERNELS_N2=ON"), std::string::npos)
        << e.what();
  }
}
#endif

}  // namespace
}  // namespace mhc
