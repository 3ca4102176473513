// The link-time seam of test_schedule_dropped_join: this definition replaces the library's
// (src/schedule/join.cpp), so the overlap schedule of this binary has no join. Objects are
// linked before libraries, so the library's join.cpp never enters this binary.
#include <cuda_runtime_api.h>

namespace mhc::cuda::detail {

void join_side_stream(cudaStream_t, cudaEvent_t) {}

}  // namespace mhc::cuda::detail
