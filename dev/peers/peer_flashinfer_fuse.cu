// FlashInfer's mhc_pre_big_fuse.cu compiled as it ships, with a raw-pointer entry that calls the
// same launcher (launch_pre_big_fuse, default block size) the TVM-FFI export calls.
#include "mhc_pre_big_fuse.cu"  // from .peers/src/flashinfer/csrc/mhc (fetch-peers.sh)
#include "peers.hpp"

namespace peers {

void flashinfer_pre_big_fuse(const float* dot_mix, const float* sqrsum, const void* residual,
                             const float* scale, const float* base, float* post, float* comb,
                             void* layer_input, int64_t tokens, int64_t hidden, double rms_eps,
                             double pre_eps, double sinkhorn_eps, double post_mult,
                             int sinkhorn_iters, int splits, cudaStream_t stream) {
  // launch_pre_big_fuse reads only data_ptr() of its views.
  auto view = [](const void* data) {
    DLTensor t{};
    t.data = const_cast<void*>(data);
    t.device = DLDevice{kDLCUDA, 0};
    return t;
  };
  DLTensor d = view(dot_mix), s = view(sqrsum), r = view(residual), sc = view(scale),
           b = view(base), p = view(post), c = view(comb), l = view(layer_input);
  flashinfer::mhc::launch_pre_big_fuse(
      TensorView(&d), TensorView(&s), TensorView(&r), TensorView(&sc), TensorView(&b),
      TensorView(&p), TensorView(&c), TensorView(&l), tokens, 4 * hidden, hidden, rms_eps, pre_eps,
      sinkhorn_eps, post_mult, sinkhorn_iters, splits, /*block_size=*/0, stream);
}

}  // namespace peers
