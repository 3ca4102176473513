// The fused boundary with 32-column stages (sm90_boundary.cuh), both stream counts: apart from
// the 64-column instantiations in prenorm_n2/n4.cu, whose SASS changes when both share a
// translation unit.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
#if defined(MHC_KERNELS_N2)
MHC_INSTANTIATE_BOUNDARY(2, 32, 128);
#endif
MHC_INSTANTIATE_BOUNDARY(4, 32, 128);
}  // namespace mhc::cuda
