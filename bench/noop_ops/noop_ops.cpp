// Benchmark only, not part of the package: no-op torch ops with exactly the schemas of mhc's _out
// ops, registered on PyTorch's stable ABI the way python/src/torch/registration.cpp registers
// torch.ops.mhc.* (bench/noop_ops/build.sh compiles it; bench/noop_dispatch.py times it). What a
// call of one costs is torch's price for that schema: Python argument parsing, the dispatcher and
// the stable ABI's boxing, with mhc's checks, setup and launch taken out.
//
// torch.ops.mhc_noop.X (X one of post_out, post_pre_out, coefficients_out, pre_out, boundary_out,
// and noop2, a two-tensor floor): as mhc's ops, an Autograd kernel that routes the call by grad
// mode through torch_call_dispatcher to _nograd_X or _grad_X, and a CPU kernel (TORCH_BOX of a
// function with the real kernel's C++ signature, inside the same noting wrapper) that does
// nothing, on X (what torch.inference_mode reaches, the Autograd key skipped) and the twins.
// torch.ops.mhc_noop.plain_X: the same schema and kernel on the CPU key alone (no Autograd
// kernel of its own: torch's autograd fallback under no_grad), what the router costs.
// torch.ops.mhc_noop.pos_X: plain_X with the schema's `*` taken out (outputs and options
// positional). torch.ops.mhc_noop.bound_pre_out and bound_boundary_out: hypothetical schemas with
// a site's weights and scalars bound once (`int site` in their place), CPU key alone.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace mhc_noop {

namespace {

using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;
using Boxed = void (*)(StableIValue*, uint64_t, uint64_t);

// registration.cpp's noting wrapper, its thread-local note without the message getter.
thread_local std::string t_noted;
template <Boxed kernel>
void noting(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  try {
    kernel(stack, num_args, num_outputs);
  } catch (const std::exception& e) {
    t_noted = e.what();
    throw;
  }
}

// The kernels: the real ones' C++ signatures (python/src/torch/ops.hpp), bodies empty.
void post_out(Tensor, Tensor, Tensor, Tensor, Tensor) {}
void post_pre_out(Tensor, Tensor, Tensor, Tensor, Tensor, OptTensor, double, Tensor, Tensor,
                  OptTensor) {}
void coefficients_out(Tensor, Tensor, Tensor, Tensor, double, double, double, double, int64_t,
                      Tensor, Tensor, Tensor, int64_t, OptTensor, std::string, bool) {}
void pre_out(Tensor, Tensor, Tensor, Tensor, OptTensor, OptTensor, double, double, double, double,
             int64_t, double, Tensor, Tensor, Tensor, Tensor, OptTensor, std::string, bool) {}
void boundary_out(Tensor, Tensor, Tensor, Tensor, Tensor, OptTensor, Tensor, Tensor, Tensor, double,
                  double, double, double, int64_t, double, Tensor, Tensor, Tensor, Tensor, Tensor,
                  OptTensor, std::string, bool) {}
void noop2(Tensor, Tensor) {}
// Hypothetical schemas with a site's weights and scalars bound once (an int handle in their place).
void bound_pre_out(int64_t, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor) {}
void bound_boundary_out(int64_t, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                        Tensor, Tensor) {}

// The schema strings of registration.cpp, copied verbatim (bench/noop_dispatch.py checks that
// each op's schema here equals the real one's).
#define MHC_COEF "Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base"
#define MHC_EPS \
  "float rms_eps, float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters"
#define MHC_OPT "Tensor? workspace=None, str projection='tf32', bool batch_invariant=False"
#define MHC_PRE MHC_COEF ", Tensor? norm_weight, Tensor? pre_mix, " MHC_EPS ", float norm_eps"
#define MHC_PRE_OUT \
  "Tensor(a!) layer_input, Tensor(b!) post, Tensor(c!) comb, Tensor(d!) next_pre_mix"
#define MHC_COEF_OUT "Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix"
#define MHC_POST "Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb"
#define MHC_POST_PRE MHC_POST ", Tensor next_pre_mix, Tensor? next_norm_weight, float norm_eps"
#define MHC_BOUNDARY                                                           \
  MHC_POST                                                                     \
  ", Tensor pre_mix, Tensor? norm_weight, Tensor fn, Tensor hc_scale, Tensor " \
  "hc_base, " MHC_EPS ", float norm_eps"
#define MHC_BOUNDARY_OUT                                                                \
  "Tensor(a!) residual_next, Tensor(b!) layer_input, Tensor(c!) next_post, Tensor(d!) " \
  "next_comb, Tensor(e!) next_pre_mix"

struct Op {
  const char* name;
  const char* schema;  // without the name
  Boxed kernel;
};

#define NOOP_OP(name, schema) \
  Op { #name, schema, &noting < TORCH_BOX(&name)> }

constexpr size_t kOps = 6;

const std::array<Op, kOps>& ops() {
  static const std::array<Op, kOps> table = {
      NOOP_OP(post_out, "(" MHC_POST ", *, Tensor(a!) out) -> ()"),
      NOOP_OP(post_pre_out,
              "(" MHC_POST_PRE ", *, Tensor(a!) residual_next, Tensor(b!) next_layer_input, "
              "Tensor? workspace=None) -> ()"),
      NOOP_OP(coefficients_out, "(" MHC_COEF ", " MHC_EPS ", *, " MHC_COEF_OUT
                                ", int side_stream=0, " MHC_OPT ") -> ()"),
      NOOP_OP(pre_out, "(" MHC_PRE ", *, " MHC_PRE_OUT ", " MHC_OPT ") -> ()"),
      NOOP_OP(boundary_out, "(" MHC_BOUNDARY ", *, " MHC_BOUNDARY_OUT ", " MHC_OPT ") -> ()"),
      NOOP_OP(noop2, "(Tensor a, Tensor(a!) out) -> ()"),
  };
  return table;
}

struct Twin {
  std::string nograd, grad;
};
const std::array<Twin, kOps>& twins() {
  static const std::array<Twin, kOps> names = [] {
    std::array<Twin, kOps> t;
    for (size_t i = 0; i < t.size(); ++i) {
      t[i].nograd = std::string("mhc_noop::_nograd_") + ops()[i].name;
      t[i].grad = std::string("mhc_noop::_grad_") + ops()[i].name;
    }
    return t;
  }();
  return names;
}

// registration.cpp's router, the same calls.
template <size_t I>
void route(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  (void)num_args;
  (void)num_outputs;
  const Twin& twin = twins()[I];
  const std::string& target = aoti_torch_grad_mode_is_enabled() ? twin.grad : twin.nograd;
  if (torch_call_dispatcher(target.c_str(), "", stack, TORCH_ABI_VERSION) != AOTI_TORCH_SUCCESS) {
    throw std::runtime_error(std::string("mhc_noop.") + ops()[I].name + " failed");
  }
}

template <size_t... I>
constexpr std::array<Boxed, sizeof...(I)> routers(std::index_sequence<I...>) {
  return {&route<I>...};
}

void define(torch::stable::detail::StableLibrary& m, const std::string& name, const char* schema) {
  m.def((name + schema).c_str());
}

}  // namespace

}  // namespace mhc_noop

STABLE_TORCH_LIBRARY(mhc_noop, m) {
  using namespace mhc_noop;
  for (const Op& op : ops()) {
    define(m, op.name, op.schema);
    define(m, std::string("_nograd_") + op.name, op.schema);
    define(m, std::string("_grad_") + op.name, op.schema);
    define(m, std::string("plain_") + op.name, op.schema);
    std::string positional = op.schema;
    const size_t star = positional.find("*, ");
    if (star != std::string::npos) positional.erase(star, 3);
    define(m, std::string("pos_") + op.name, positional.c_str());
  }
  m.def(
      "bound_pre_out(int site, Tensor residual, Tensor pre_mix, *, Tensor(a!) layer_input, "
      "Tensor(b!) post, Tensor(c!) comb, Tensor(d!) next_pre_mix) -> ()");
  m.def(
      "bound_boundary_out(int site, Tensor sublayer_out, Tensor residual, Tensor post, Tensor "
      "comb, Tensor pre_mix, *, " MHC_BOUNDARY_OUT ") -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(mhc_noop, CPU, m) {
  using namespace mhc_noop;
  for (const Op& op : ops()) {
    m.impl(op.name, op.kernel);
    m.impl((std::string("_nograd_") + op.name).c_str(), op.kernel);
    m.impl((std::string("_grad_") + op.name).c_str(), op.kernel);
    m.impl((std::string("plain_") + op.name).c_str(), op.kernel);
    m.impl((std::string("pos_") + op.name).c_str(), op.kernel);
  }
  m.impl("bound_pre_out", &noting<TORCH_BOX(&bound_pre_out)>);
  m.impl("bound_boundary_out", &noting<TORCH_BOX(&bound_boundary_out)>);
}

STABLE_TORCH_LIBRARY_IMPL(mhc_noop, Autograd, m) {
  using namespace mhc_noop;
  static constexpr auto table = routers(std::make_index_sequence<kOps>());
  for (size_t i = 0; i < table.size(); ++i) m.impl(ops()[i].name, table[i]);
}
