// The fused boundary with the wide stages (sm90_boundary.cuh: 32-token tiles of 128-column
// stages, four column warps per 16 rows), both stream counts: apart from the other shapes'
// instantiations, as boundary_32.cu.
#include "prenorm_dispatch.cuh"

namespace mhc::cuda {
#if defined(MHC_KERNELS_N2)
MHC_INSTANTIATE_BOUNDARY(2, 128, 32);
#endif
MHC_INSTANTIATE_BOUNDARY(4, 128, 32);
}  // namespace mhc::cuda
