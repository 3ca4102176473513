#include "site.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "../launch.hpp"
#include "mhc/core/params.hpp"
#include "ops.hpp"

namespace mhc::torch_ops {

namespace {

// What bind_site binds: references to the caller's tensors (no copies) and the call's scalars,
// checked then and made into the calls' parameters once (`prepared`): a call checks its tensors
// and the bound ones (which may have been replaced), not the scalars.
struct BoundSite {
  Tensor fn, hc_scale, hc_base;
  OptTensor norm_weight, workspace;
  double rms_eps, pre_eps, sinkhorn_eps, post_mult, norm_eps;
  int64_t sinkhorn_iters;
  std::string projection;
  bool batch_invariant;
  int64_t n, c;
  Where dev;
  Prepared prepared{};  // made by bind_site after its checks
};

using SitePtr = std::shared_ptr<const BoundSite>;

// The process's bound sites, as the workspace pool (pool.cpp) keeps its workspaces: one table
// behind a mutex, never destroyed (its tensors must not outlive libtorch). A call copies the
// site's pointer out under the lock, so a release during another thread's call is safe.
struct Registry {
  std::mutex mutex;
  std::unordered_map<int64_t, SitePtr> sites;
  int64_t next = 1;  // handles count up and are never reused
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// The site of `handle`, or an error saying why there is none.
SitePtr lookup(const char* op, int64_t handle) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.sites.find(handle);
  if (it != r.sites.end()) return it->second;
  if (handle >= 1 && handle < r.next) {
    fail(
        fmt::format("mhc.{}: site {} was released (mhc.release_site or Site.close()); bind the "
                    "site again with mhc.bind_site",
                    op, handle));
  }
  fail(
      fmt::format("mhc.{}: site {} was never bound in this process (a site is the handle "
                  "mhc.bind_site returns)",
                  op, handle));
}

// The site of `handle` for a call of `op`, which must be under no_grad or inference_mode.
SitePtr site_for_call(const char* op, int64_t handle) {
  const launch::profile::Scope timed(launch::profile::kChecks);  // with the call's own checks
  SitePtr site = lookup(op, handle);
  if (aoti_torch_grad_mode_is_enabled()) {
    fail(
        fmt::format("mhc.{} is inference-only: call it under torch.no_grad() or "
                    "torch.inference_mode() (its bound weights are invisible to autograd); "
                    "with grad enabled use the unbound op, whose backward raises",
                    op));
  }
  return site;
}

// Runs `body` on the site of `handle`; an error of the unbound op's checks gets the bound op and
// the site appended, since its message names a tensor the caller did not pass.
template <typename Body>
void with_site(const char* op, int64_t handle, Body&& body) {
  const SitePtr site = site_for_call(op, handle);
  try {
    body(*site);
  } catch (const std::exception& e) {
    fail(
        fmt::format("{} (in mhc.{}: fn, hc_scale, hc_base, norm_weight and workspace are site "
                    "{}'s, bound by mhc.bind_site)",
                    e.what(), op, handle));
  }
}

// n from fn's N = n(n+2) rows and C from its n*C columns, before the unbound checks (which take
// them from residual) can say more.
void site_shape_of(const char* op, const Tensor& fn, BoundSite& site) {
  defined(op, "fn", fn);
  const int64_t rows = fn.dim() == 2 ? fn.size(0) : 0, cols = fn.dim() == 2 ? fn.size(1) : 0;
  for (int64_t n = 1; n <= kMaxStreams; ++n) {
    if (n * (n + 2) == rows && cols > 0 && cols % n == 0) {
      site.n = n;
      site.c = cols / n;
      return;
    }
  }
  std::string shape = "[";
  for (int64_t i = 0; i < fn.dim(); ++i) shape += (i ? ", " : "") + std::to_string(fn.size(i));
  fail(fmt::format("mhc.{}: fn has shape {}], expected [n(n+2), n*C] with n in 1..{}", op, shape,
                   kMaxStreams));
}

// One device for all of a site's tensors, named against fn's.
void same_device(const char* op, const char* name, const OptTensor& t, const Where& dev) {
  if (!t) return;
  defined(op, name, *t);
  if (!(where(*t) == dev)) {
    fail(fmt::format("mhc.{}: {} is on {} but fn is on {}; a site's tensors must be on one device",
                     op, name, where(*t).text(), dev.text()));
  }
}

void bind_checks(const char* op, BoundSite& s) {
  site_shape_of(op, s.fn, s);
  s.dev = where(s.fn);
  runnable(op, s.dev);
  same_device(op, "hc_scale", s.hc_scale, s.dev);
  same_device(op, "hc_base", s.hc_base, s.dev);
  same_device(op, "norm_weight", s.norm_weight, s.dev);
  same_device(op, "workspace", s.workspace, s.dev);
  const Streams shape{0, s.n, s.c, s.dev};
  weights(op, s.fn, s.hc_scale, s.hc_base, shape, s.dev);
  optional(op, "norm_weight", s.norm_weight, norm_weight_dtypes(), {s.c}, &s.dev, "[C]");
  scalars(op, s.rms_eps, s.pre_eps, s.sinkhorn_eps, s.post_mult, s.sinkhorn_iters, s.projection);
  finite_nonnegative(op, "norm_eps", s.norm_eps);
  if (s.workspace && (dtype_of(*s.workspace) != aoti_torch_dtype_uint8() ||
                      s.workspace->dim() != 1 || !s.workspace->is_contiguous())) {
    fail(
        fmt::format("mhc.{}: workspace must be a contiguous 1-D uint8 tensor from "
                    "mhc.make_workspace(...)",
                    op));
  }
}

}  // namespace

int64_t bind_site(Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, OptTensor workspace, std::string projection,
                  bool batch_invariant) {
  auto site = std::make_shared<BoundSite>(
      BoundSite{fn, hc_scale, hc_base, norm_weight, workspace, rms_eps, pre_eps, sinkhorn_eps,
                post_mult, norm_eps, sinkhorn_iters, projection, batch_invariant, 0, 0, Where{}});
  bind_checks("bind_site", *site);
  site->prepared = prepare(site->n, site->c, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                           sinkhorn_iters, norm_eps, projection);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const int64_t handle = r.next++;
  r.sites.emplace(handle, std::move(site));
  return handle;
}

void release_site(int64_t site) {
  SitePtr released;  // its tensors are let go after the lock, outside the table
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.sites.find(site);
  if (it == r.sites.end()) return;  // releasing twice is harmless (Site.close() then __del__)
  released = std::move(it->second);
  r.sites.erase(it);
}

int64_t site_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return int64_t(r.sites.size());
}

int site_state(int64_t site, int64_t out[kSiteStateFields]) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.sites.find(site);
  if (it == r.sites.end()) return site >= 1 && site < r.next ? -1 : 0;
  const BoundSite& s = *it->second;
  out[0] = s.n;
  out[1] = s.c;
  out[2] = s.dev.type;
  out[3] = s.dev.index;
  out[4] = s.norm_weight ? 1 : 0;
  return 1;
}

void site_pre_out(int64_t site, Tensor residual, OptTensor pre_mix, Tensor layer_input, Tensor post,
                  Tensor comb, Tensor next_pre_mix) {
  with_site("site_pre_out", site, [&](const BoundSite& s) {
    pre_to(residual, s.fn, s.hc_scale, s.hc_base, s.norm_weight, pre_mix, s.rms_eps, s.pre_eps,
           s.sinkhorn_eps, s.post_mult, s.sinkhorn_iters, s.norm_eps, {&layer_input, nullptr}, post,
           comb, next_pre_mix, s.workspace, s.projection, s.batch_invariant, &s.prepared);
  });
}

void site_coefficients_out(int64_t site, Tensor residual, Tensor post, Tensor comb,
                           Tensor next_pre_mix, int64_t side_stream) {
  with_site("site_coefficients_out", site, [&](const BoundSite& s) {
    coefficients_to(residual, s.fn, s.hc_scale, s.hc_base, s.rms_eps, s.pre_eps, s.sinkhorn_eps,
                    s.post_mult, s.sinkhorn_iters, post, comb, next_pre_mix, side_stream,
                    s.workspace, s.projection, s.batch_invariant, &s.prepared);
  });
}

void site_pre_overlap_out(int64_t site, Tensor residual, Tensor pre_mix, int64_t side_stream,
                          Tensor layer_input, Tensor post, Tensor comb, Tensor next_pre_mix) {
  // The bound workspace is the coefficient path's (the side stream's, where there is one); the
  // input path's scratch, where it needs any, comes from the pool's slot of the current stream.
  with_site("site_pre_overlap_out", site, [&](const BoundSite& s) {
    pre_overlap_to(residual, s.fn, s.hc_scale, s.hc_base, s.norm_weight, pre_mix, s.rms_eps,
                   s.pre_eps, s.sinkhorn_eps, s.post_mult, s.sinkhorn_iters, s.norm_eps,
                   side_stream, layer_input, post, comb, next_pre_mix, s.workspace, s.projection,
                   s.batch_invariant, std::nullopt, &s.prepared);
  });
}

void site_boundary_out(int64_t site, Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                       Tensor pre_mix, Tensor residual_next, Tensor layer_input, Tensor next_post,
                       Tensor next_comb, Tensor next_pre_mix) {
  // The site is the next one: its norm weight, weights and scalars, as boundary_out's.
  with_site("site_boundary_out", site, [&](const BoundSite& s) {
    boundary_to(sublayer_out, residual, post, comb, pre_mix, s.norm_weight, s.fn, s.hc_scale,
                s.hc_base, s.rms_eps, s.pre_eps, s.sinkhorn_eps, s.post_mult, s.sinkhorn_iters,
                s.norm_eps, residual_next, {&layer_input, nullptr}, next_post, next_comb,
                next_pre_mix, s.workspace, s.projection, s.batch_invariant, &s.prepared);
  });
}

}  // namespace mhc::torch_ops
