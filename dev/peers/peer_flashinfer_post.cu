// FlashInfer's mhc_post.cu compiled as it ships (its TVM-FFI export included), with a raw-pointer
// entry that calls the same dispatch (launch_bf16_hc4) the export calls.
#include "mhc_post.cu"  // from .peers/src/flashinfer/csrc/mhc (fetch-peers.sh)
#include "peers.hpp"

namespace peers {
namespace {
DLTensor view(const void* data, DLDataType dtype, int ndim, int64_t* shape) {
  DLTensor t{};
  t.data = const_cast<void*>(data);
  t.device = DLDevice{kDLCUDA, 0};
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}
}  // namespace

void flashinfer_post(const void* layer_out, const void* residual, const float* post,
                     const float* comb, void* out, int64_t tokens, int64_t hidden,
                     cudaStream_t stream) {
  int64_t s_x[2] = {tokens, hidden}, s_r[3] = {tokens, 4, hidden}, s_p[2] = {tokens, 4},
          s_c[3] = {tokens, 4, 4};
  DLTensor x = view(layer_out, dl_bfloat16, 2, s_x), r = view(residual, dl_bfloat16, 3, s_r),
           p = view(post, dl_float32, 2, s_p), c = view(comb, dl_float32, 3, s_c),
           o = view(out, dl_bfloat16, 3, s_r);
  flashinfer::mhc::launch_bf16_hc4(TensorView(&x), TensorView(&r), TensorView(&p), TensorView(&c),
                                   TensorView(&o), tokens, hidden, stream);
}

}  // namespace peers
