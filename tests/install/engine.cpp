// A C++ engine's mHC site through the installed library's C++ API (mhc/api.hpp, docs/cpp.md):
// the launch description made once, device buffers and a workspace, then pre -> sublayer -> post
// on one stream, checked against the CPU backend. Without a GPU (or a CUDA build) it says so and
// exits 0; a wrong result exits 1.
#include <cstdio>
#include <mhc/mhc.hpp>
#include <type_traits>
#include <vector>
#if defined(MHC_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

#if defined(MHC_WITH_CUDA)
void check(cudaError_t err) {
  if (err != cudaSuccess) throw mhc::Error(cudaGetErrorString(err));
}

// A GPU result against the CPU backend's, by the library's own measure (mhc/cpu/compare.hpp).
template <typename T>
mhc::ErrorStats against(const std::vector<T>& gpu, const std::vector<T>& cpu) {
  std::vector<double> reference(cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    if constexpr (std::is_same_v<T, mhc::Bf16>) {
      reference[i] = mhc::bf16_to_float(cpu[i]);
    } else {
      reference[i] = cpu[i];
    }
  }
  return mhc::compare(gpu.data(), reference.data(), int64_t(gpu.size()));
}

// A device copy of a host vector, freed with the object.
template <typename T>
struct Device {
  T* ptr = nullptr;
  size_t count = 0;
  explicit Device(const std::vector<T>& host) : count(host.size()) {
    check(cudaMalloc(&ptr, count * sizeof(T)));
    check(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit Device(size_t n) : count(n) { check(cudaMalloc(&ptr, count * sizeof(T))); }
  ~Device() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(count);
    check(cudaMemcpy(out.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
};

int run_site() {
  // Once per device and kernel config (here the defaults): the launch description.
  const mhc::KernelPlan plan = mhc::device_plan(0);
  // Once per site shape: DeepSeek-V4.1's constants, a small C for a quick check.
  mhc::MhcParams p = mhc::preset("dsv41-flash");
  p.hidden = 1024;
  const mhc::Ops ops(plan, p);
  const int64_t T = 8, n = p.n, C = p.hidden, K = p.k(), nmix = p.nmix();

  // Weights and inputs (an engine has them on the device already).
  std::vector<float> fn(size_t(nmix * K)), scale = {0.5f, 0.5f, 1.f}, base(size_t(nmix), 0.1f);
  std::vector<float> norm(size_t(C), 1.f), pre_mix(size_t(T * n), 1.f / float(n));
  std::vector<mhc::Bf16> residual(size_t(T * K));
  for (size_t i = 0; i < fn.size(); ++i) fn[i] = float(int(i * 7919 % 201) - 100) * 1e-4f;
  for (size_t i = 0; i < residual.size(); ++i)
    residual[i] = mhc::float_to_bf16(float(int(i * 104729 % 401) - 200) * 5e-3f);
  const Device<float> d_fn(fn), d_scale(scale), d_base(base), d_norm(norm), d_pre_mix(pre_mix);
  const Device<mhc::Bf16> d_residual(residual);
  Device<mhc::Bf16> layer_input(size_t(T * C)), residual_next(size_t(T * K));
  Device<float> pre(size_t(T * n)), post(size_t(T * n)), comb(size_t(T * n * n));

  // The workspace: sized for the largest batch, zeroed once, kept.
  Device<unsigned char> workspace(size_t(mhc::workspace_bytes(p, T)));
  check(cudaMemset(workspace.ptr, 0, workspace.count));
  const mhc::Workspace ws{workspace.ptr, int64_t(workspace.count)};

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const mhc::HcWeights w{d_fn.ptr, d_scale.ptr, d_base.ptr};
  const mhc::Coefficients out{pre.ptr, post.ptr, comb.ptr};
  ops.pre(T, d_residual.ptr, w, {d_norm.ptr, false}, d_pre_mix.ptr, layer_input.ptr, out, ws,
          stream);
  // The sublayer (attention / MoE) would run here on layer_input; this one is the identity.
  ops.post(T, {layer_input.ptr, d_residual.ptr, post.ptr, comb.ptr, residual_next.ptr}, stream);
  check(cudaStreamSynchronize(stream));
  check(cudaStreamDestroy(stream));

  // The same site on the CPU backend (fp32).
  std::vector<mhc::Bf16> cpu_input(size_t(T * C)), cpu_next(size_t(T * K));
  std::vector<float> cpu_pre(size_t(T * n)), cpu_post(size_t(T * n)), cpu_comb(size_t(T * n * n));
  mhc::cpu::input_path(p, T, residual.data(), pre_mix.data(), norm.data(), cpu_input.data());
  mhc::cpu::coefficients(p, T, residual.data(), {fn.data(), base.data(), scale.data(), nullptr},
                         cpu_pre.data(), cpu_post.data(), cpu_comb.data());
  mhc::cpu::post(p, T, residual.data(), cpu_post.data(), cpu_comb.data(), cpu_input.data(),
                 cpu_next.data());
  const mhc::ErrorStats checks[] = {
      against(comb.host(), cpu_comb), against(post.host(), cpu_post), against(pre.host(), cpu_pre),
      against(layer_input.host(), cpu_input), against(residual_next.host(), cpu_next)};
  bool ok = true;
  for (int i = 0; i < 5; ++i) {
    const auto& tolerances = mhc::kTf32Tolerances;
    ok = ok && checks[i].passes(i < 3 ? tolerances.coefficients : tolerances.activations);
  }
  std::printf(
      "engine: pre and post on %s, against the CPU backend: comb %s, residual_next %s: %s\n",
      plan.summary().c_str(), checks[0].describe().c_str(), checks[4].describe().c_str(),
      ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
#endif

}  // namespace

int main() {
  if (!mhc::cuda_available()) {
    std::printf("engine: no CUDA GPU (or a build without CUDA): the device calls were skipped\n");
    return 0;
  }
#if defined(MHC_WITH_CUDA)
  try {
    return run_site();
  } catch (const mhc::Error& e) {
    std::printf("engine: %s\n", e.what());
    return 1;
  }
#endif
}
