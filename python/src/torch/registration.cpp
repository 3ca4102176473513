// The torch ops library: registers torch.ops.mhc.* on PyTorch's stable ABI (STABLE_TORCH_LIBRARY),
// with the schemas the ops have always had (docs/python.md), one C++ kernel per op for CPU and
// CUDA tensors (ops.cpp), and the inference-only autograd behaviour:
//
// Each op X has an Autograd kernel here that routes the call by grad mode. With grad disabled
// (torch.no_grad; under torch.inference_mode the Autograd key is skipped altogether) it calls
// mhc::_nograd_X, which has the same kernels and no autograd kernel of its own: torch's fallback
// passes it straight to the C++ kernel (or, for fake and meta tensors, to the Python fake), with
// no Python on the way. With grad enabled it calls mhc::_grad_X, whose Autograd kernel is Python
// (mhc/_autograd.py): where an input requires grad, the outputs hang off a node whose backward
// raises, so gradients are never silently missing. The stable ABI has no redispatch below
// autograd and no requires_grad query, hence the twins.
//
// The fakes and the Python autograd kernel live in mhc/ops.py, which loads this library.
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/library.h>

#include <array>
#include <stdexcept>
#include <string>
#include <utility>

#include "../launch.hpp"
#include "fp8.hpp"
#include "head.hpp"
#include "ops.hpp"
#include "pool.hpp"
#include "site.hpp"

namespace mhc::torch_ops {

namespace {

// ---- errors across the dispatcher -----------------------------------------------------------

// The message of the last error raised by this library's kernels or noted by its Python fakes on
// this thread: torch_call_dispatcher returns only an error code, and torch before 2.13 offers no
// way to read the message back.
thread_local std::string t_noted;
thread_local bool t_has_noted = false;

void note(const char* message) {
  t_noted = message;
  t_has_noted = true;
}

using Boxed = void (*)(StableIValue*, uint64_t, uint64_t);

// A boxed kernel that notes its error before the exception leaves the library.
template <Boxed kernel>
void noting(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  try {
    kernel(stack, num_args, num_outputs);
  } catch (const std::exception& e) {
    note(e.what());
    throw;
  }
}

// torch's own message of the failed call where the running torch has the getter (2.13 on).
const char* torch_message() {
  using Getter = const char* (*)();
  static const Getter getter = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&note), &info)) return Getter(nullptr);
    void* self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!self) return Getter(nullptr);
    return reinterpret_cast<Getter>(dlsym(self, "torch_exception_get_what_without_backtrace"));
  }();
  return getter ? getter() : nullptr;
}

std::string routed_error(const char* op) {
  if (t_has_noted) return t_noted;
  const char* message = torch_message();
  if (message) return message;
  return std::string("mhc.") + op + " failed inside torch (this torch gives no message back; " +
         "the log above has it)";
}

// ---- the ops ------------------------------------------------------------------------------

#define MHC_COEF "Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base"
#define MHC_EPS \
  "float rms_eps, float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters"
#define MHC_OPT "Tensor? workspace=None, str projection='tf32', bool batch_invariant=False"
#define MHC_PRE MHC_COEF ", Tensor? norm_weight, Tensor? pre_mix, " MHC_EPS ", float norm_eps"
#define MHC_OVL \
  MHC_COEF ", Tensor? norm_weight, Tensor pre_mix, " MHC_EPS ", float norm_eps, int side_stream"
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

#define MHC_OP(name, schema) \
  Op { #name, schema, &noting < TORCH_BOX(&name)> }

constexpr size_t kOps = 22;

const std::array<Op, kOps>& ops() {
  static const std::array<Op, kOps> table = {
      MHC_OP(hc_prenorm_gemm,
             "(Tensor x, Tensor fn, Tensor(a!) out, Tensor(b!) sqrsum, int num_splits) -> ()"),
      MHC_OP(pre, "(" MHC_PRE ", *, " MHC_OPT ") -> (Tensor, Tensor, Tensor, Tensor)"),
      MHC_OP(pre_out, "(" MHC_PRE ", *, " MHC_PRE_OUT ", " MHC_OPT ") -> ()"),
      MHC_OP(coefficients, "(" MHC_COEF ", " MHC_EPS ", *, int side_stream=0, " MHC_OPT
                           ") -> (Tensor, Tensor, Tensor)"),
      MHC_OP(coefficients_out, "(" MHC_COEF ", " MHC_EPS ", *, " MHC_COEF_OUT
                               ", int side_stream=0, " MHC_OPT ") -> ()"),
      MHC_OP(pre_overlap, "(" MHC_OVL ", *, " MHC_OPT
                          ", Tensor? main_workspace=None) -> (Tensor, Tensor, Tensor, Tensor)"),
      MHC_OP(pre_overlap_out,
             "(" MHC_OVL ", *, " MHC_PRE_OUT ", " MHC_OPT ", Tensor? main_workspace=None) -> ()"),
      MHC_OP(join,
             "(int side_stream, Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix) -> ()"),
      MHC_OP(post, "(" MHC_POST ") -> Tensor"),
      MHC_OP(post_out, "(" MHC_POST ", *, Tensor(a!) out) -> ()"),
      MHC_OP(post_pre, "(" MHC_POST_PRE ", *, Tensor? workspace=None) -> (Tensor, Tensor)"),
      MHC_OP(post_pre_out,
             "(" MHC_POST_PRE ", *, Tensor(a!) residual_next, Tensor(b!) next_layer_input, "
             "Tensor? workspace=None) -> ()"),
      MHC_OP(boundary,
             "(" MHC_BOUNDARY ", *, " MHC_OPT ") -> (Tensor, Tensor, Tensor, Tensor, Tensor)"),
      MHC_OP(boundary_out, "(" MHC_BOUNDARY ", *, " MHC_BOUNDARY_OUT ", " MHC_OPT ") -> ()"),
      MHC_OP(head, kHeadSchema),
      MHC_OP(head_out, kHeadOutSchema),
      MHC_OP(pre_fp8, kPreFp8Schema),
      MHC_OP(pre_fp8_out, kPreFp8OutSchema),
      MHC_OP(post_pre_fp8, kPostPreFp8Schema),
      MHC_OP(post_pre_fp8_out, kPostPreFp8OutSchema),
      MHC_OP(boundary_fp8, kBoundaryFp8Schema),
      MHC_OP(boundary_fp8_out, kBoundaryFp8OutSchema),
  };
  return table;
}

// The twins' names ("mhc::_nograd_pre", "mhc::_grad_pre"), made once.
struct Twin {
  std::string nograd, grad;
};
const std::array<Twin, kOps>& twins() {
  static const std::array<Twin, kOps> names = [] {
    std::array<Twin, kOps> t;
    for (size_t i = 0; i < t.size(); ++i) {
      t[i].nograd = std::string("mhc::_nograd_") + ops()[i].name;
      t[i].grad = std::string("mhc::_grad_") + ops()[i].name;
    }
    return t;
  }();
  return names;
}

// The Autograd kernel of op I: the call goes on to a twin (see the top of this file).
template <size_t I>
void route(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  (void)num_args;
  (void)num_outputs;
  const Twin& twin = twins()[I];
  const std::string& target = aoti_torch_grad_mode_is_enabled() ? twin.grad : twin.nograd;
  t_has_noted = false;
  if (torch_call_dispatcher(target.c_str(), "", stack, TORCH_ABI_VERSION) != AOTI_TORCH_SUCCESS) {
    throw std::runtime_error(routed_error(ops()[I].name));
  }
}

template <size_t... I>
constexpr std::array<Boxed, sizeof...(I)> routers(std::index_sequence<I...>) {
  return {&route<I>...};
}

// ---- bound sites (site.hpp) -----------------------------------------------------------------

// The bound ops: kernels on the CPU and CUDA keys alone. Without an Autograd kernel torch's
// fallback passes a call under no_grad straight to them, with no router and no second trip
// through the dispatcher; with grad enabled the kernels refuse the call (site.hpp).
constexpr size_t kSiteOps = 5;
const std::array<Op, kSiteOps>& site_ops() {
  static const std::array<Op, kSiteOps> table = {
      MHC_OP(bind_site, kBindSiteSchema),
      MHC_OP(site_pre_out, kSitePreOutSchema),
      MHC_OP(site_coefficients_out, kSiteCoefficientsOutSchema),
      MHC_OP(site_pre_overlap_out, kSitePreOverlapOutSchema),
      MHC_OP(site_boundary_out, kSiteBoundaryOutSchema),
  };
  return table;
}

// ---- configuration, plans and the workspace pool (mhc.configure, mhc.plan, DEFAULT_POOL) -----

void configure(std::string kernel_config) { launch::configure(kernel_config); }
std::string config() { return launch::config_json(); }
std::string plan(int64_t device, bool batch_invariant) {
  return launch::plan_json(int(device), batch_invariant);
}
Tensor workspace(torch::stable::Device device, int64_t hidden, int64_t n, int64_t tokens,
                 int64_t slot) {
  Where w;
  w.type = static_cast<int32_t>(
      torch::stable::detail::to<int32_t>(torch::stable::detail::from(device.type())));
  w.index = device.index();
  return pool_workspace(w, hidden, n, tokens, slot);
}
void workspace_clear() { pool_clear(); }
int64_t workspace_count() { return pool_size(); }
bool built_with_cuda() { return launch::built_with_cuda(); }
// This thread's host-time profile since the last call (launch::profile), then profiling on or off.
std::string host_profile(bool enable) {
  std::string sums = launch::profile::take();
  launch::profile::enable(enable);
  return sums;
}

void define(torch::stable::detail::StableLibrary& m, const std::string& name, const char* schema) {
  m.def((name + schema).c_str());
}

}  // namespace

}  // namespace mhc::torch_ops

// The fakes (Python) note their errors here before raising, for routed_error.
extern "C" __attribute__((visibility("default"))) void mhc_torch_note_error(const char* message) {
  mhc::torch_ops::note(message);
}

// The bound ops' fakes read a site's state, n, C and device here (site.hpp, site_state).
extern "C" __attribute__((visibility("default"))) int mhc_torch_site_state(int64_t site,
                                                                           int64_t* out) {
  return mhc::torch_ops::site_state(site, out);
}

STABLE_TORCH_LIBRARY(mhc, m) {
  using namespace mhc::torch_ops;
  for (const Op& op : ops()) {
    define(m, op.name, op.schema);
    define(m, std::string("_nograd_") + op.name, op.schema);
    define(m, std::string("_grad_") + op.name, op.schema);
  }
  for (const Op& op : site_ops()) define(m, op.name, op.schema);
  m.def("release_site(int site) -> ()");
  m.def("_site_count() -> int");
  m.def("_configure(str kernel_config) -> ()");
  m.def("_config() -> str");
  m.def("_plan(int device, bool batch_invariant=False) -> str");
  m.def("_workspace(Device device, int hidden, int n, int tokens, int slot=0) -> Tensor");
  m.def("_workspace_clear() -> ()");
  m.def("_workspace_count() -> int");
  m.def("_built_with_cuda() -> bool");
  m.def("_host_profile(bool enable) -> str");
}

namespace {

void register_kernels(torch::stable::detail::StableLibrary& m) {
  using namespace mhc::torch_ops;
  for (const Op& op : ops()) {
    m.impl(op.name, op.kernel);
    m.impl((std::string("_nograd_") + op.name).c_str(), op.kernel);
    m.impl((std::string("_grad_") + op.name).c_str(), op.kernel);
  }
  for (const Op& op : site_ops()) m.impl(op.name, op.kernel);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(mhc, CPU, m) { register_kernels(m); }
STABLE_TORCH_LIBRARY_IMPL(mhc, CUDA, m) { register_kernels(m); }

STABLE_TORCH_LIBRARY_IMPL(mhc, Autograd, m) {
  using namespace mhc::torch_ops;
  static constexpr auto table = routers(std::make_index_sequence<kOps>());
  for (size_t i = 0; i < table.size(); ++i) m.impl(ops()[i].name, table[i]);
}

STABLE_TORCH_LIBRARY_IMPL(mhc, CompositeExplicitAutograd, m) {
  using namespace mhc::torch_ops;
  m.impl("release_site", TORCH_BOX(&release_site));
  m.impl("_site_count", TORCH_BOX(&site_count));
  m.impl("_configure", TORCH_BOX(&configure));
  m.impl("_config", TORCH_BOX(&config));
  m.impl("_plan", TORCH_BOX(&plan));
  m.impl("_workspace", TORCH_BOX(&workspace));
  m.impl("_workspace_clear", TORCH_BOX(&workspace_clear));
  m.impl("_workspace_count", TORCH_BOX(&workspace_count));
  m.impl("_built_with_cuda", TORCH_BOX(&built_with_cuda));
  m.impl("_host_profile", TORCH_BOX(&host_profile));
}
