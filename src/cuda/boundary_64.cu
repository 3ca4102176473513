// The fused boundary with 64-token tiles (sm90_boundary.cuh; 64-column stages), both stream
// counts: apart from the 128-token instantiations in prenorm_n2/n4.cu, as boundary_32.cu.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
#if defined(MHC_KERNELS_N2)
MHC_INSTANTIATE_BOUNDARY(2, 64, 64);
#endif
MHC_INSTANTIATE_BOUNDARY(4, 64, 64);
}  // namespace mhc::cuda
