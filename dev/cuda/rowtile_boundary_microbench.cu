// Developer micro-benchmark (not a test; built by CMake as mhc_rowtile_boundary_microbench when
// CUDA is on): a prototype of the fused boundary cut by whole rows instead of column splits
// (dev/cuda/rowtile_boundary.cuh), to measure whether that shape streams at the
// copy's rate with everything computed (issue 17; the question docs/decisions.md left "for
// measurement" in "Fused boundary kernel, first form").
//
// Checked against the library: x_next bitwise and layer_input within one bf16 ulp of the row
// kernel's post + next input (launch_post), the sums against a float64 reference of the same
// TF32-rounded hc_fn, the coefficients bitwise against token_coefficients of the kernel's sums.
// Timed beside the runtime's memcpy of the boundary's bytes and the row kernel's post.
// Run on an sm_90 GPU: mhc_rowtile_boundary_microbench [--hidden C] [--tokens a,b] [--json F]
//                      [--commit X] [--check-only]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "micro_report.hpp"
#include "micro_timing.hpp"
#include "rowtile_boundary.cuh"

namespace {

using namespace mhc::cuda;
using namespace mhc::bench::rowtile;

// ---- inputs, references and checks ---------------------------------------------------------

__device__ __forceinline__ float uniform(uint64_t i, uint32_t salt) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) * 2246822519u ^ salt * 3266489917u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return float(h >> 8) * (1.f / 16777216.f);  // [0, 1)
}
__global__ void fill_bf16(uint16_t* out, int64_t count, uint32_t salt, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = uint16_t(f32_to_bf16_bits(lo + (hi - lo) * uniform(uint64_t(i), salt)));
  }
}
__global__ void fill_f32(float* out, int64_t count, uint32_t salt, float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = lo + (hi - lo) * uniform(uint64_t(i), salt);
  }
}

struct Failures {
  unsigned long long x_next, layer_input_any, layer_input_far, sums, coefficients;
  float max_sum_error;  // |got - want| / sum |terms|
};

__global__ void compare_bits16(const uint16_t* want, const uint16_t* got, int64_t count,
                               unsigned long long* any, unsigned long long* far) {
  unsigned long long local_any = 0, local_far = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int a = want[i], b = got[i];
    local_any += a != b;
    local_far += ((a ^ b) & 0x8000) != 0 ? a != b : abs(a - b) > 1;  // one bf16 ulp apart
  }
  if (local_any) atomicAdd(any, local_any);
  if (far != nullptr && local_far) atomicAdd(far, local_far);
}

// Row `blockIdx.x`'s 24 dot products and sum of squares in float64 from the reference x_next and
// the TF32-rounded hc_fn; counts sums off by more than 1e-4 of the sum of |terms|.
__global__ void check_sums(const uint16_t* x_next, const float* hc_fn, const float* got, int hidden,
                           Failures* fails) {
  __shared__ double part[256][2];
  const int64_t row = blockIdx.x, k_total = int64_t(kStreams) * hidden;
  for (int q = 0; q < kSums; ++q) {
    double s = 0, abs_s = 0;
    for (int64_t k = threadIdx.x; k < k_total; k += blockDim.x) {
      const double x = __uint_as_float(uint32_t(x_next[row * k_total + k]) << 16);
      const double h = q < kNmix ? double(__uint_as_float(to_tf32(hc_fn[q * k_total + k]))) : x;
      s += x * h;
      abs_s += fabs(x * h);
    }
    part[threadIdx.x][0] = s, part[threadIdx.x][1] = abs_s;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0, abs_total = 0;
      for (int i = 0; i < blockDim.x; ++i) total += part[i][0], abs_total += part[i][1];
      const double error = fabs(double(got[row * kSums + q]) - total) / (abs_total + 1e-30);
      if (!(error <= 1e-4)) atomicAdd(&fails->sums, 1ull);  // NaN fails
      if (error == error)
        atomicMax(reinterpret_cast<int*>(&fails->max_sum_error), __float_as_int(float(error)));
    }
    __syncthreads();
  }
}

__global__ void reference_coefficients(const float* sums, int64_t tokens, CoefficientParams cp,
                                       const float* params, CoefficientOutputs out) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < tokens) token_coefficients<kStreams>(sums + row * kSums, row, cp, params, out);
}

__global__ void compare_f32_bits(const float* want, const float* got, int64_t count,
                                 unsigned long long* wrong) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (__float_as_uint(want[i]) != __float_as_uint(got[i]) || want[i] != want[i]) {
      atomicAdd(wrong, 1ull);
    }
  }
}

// ---- the host side ---------------------------------------------------------------------------

struct Variant {
  const char* name;
  int stages, depth, cluster_ctas;
  bool cluster_scope_release = false;
  int lane_cols = 8;  // columns per lane: 8 (4 consumer warps) or 4 (8 consumer warps)
};

using Kernel = void (*)(Args);
Kernel kernel_for(const Variant& v) {
  if (v.lane_cols == 4) {
    return v.depth == 3 ? rowtile_boundary_kernel<4, 2, 3> : rowtile_boundary_kernel<4, 2, 2>;
  }
  if (v.cluster_scope_release) return rowtile_boundary_kernel<8, 2, 2, true>;
  if (v.stages == 3) return rowtile_boundary_kernel<8, 3, 2>;
  if (v.depth == 1) return rowtile_boundary_kernel<8, 2, 1>;
  if (v.depth == 3) return rowtile_boundary_kernel<8, 2, 3>;
  return rowtile_boundary_kernel<8, 2, 2>;
}
int threads_for(const Variant& v) {
  return v.lane_cols == 4 ? Shape<4>::kThreads : Shape<8>::kThreads;
}

template <typename T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  MHC_MICRO_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

struct Buffers {
  uint16_t *x, *f, *x_next, *layer_input, *x_next_ref, *layer_input_ref;
  float *post, *comb, *pre, *norm_weight, *hc_fn, *packed, *sums, *params;
  float *out_pre, *out_post, *out_comb, *ref_pre, *ref_post, *ref_comb;
  Failures* fails;
};

// The row kernel's post + next input into the reference buffers (the check's x_next and
// layer_input, and the timing's baseline).
PostArgs reference_post_args(const Buffers& b, int hidden) {
  PostArgs pa;
  pa.x = b.x, pa.post = b.post, pa.comb = b.comb, pa.sublayer_out = b.f, pa.x_next = b.x_next_ref;
  pa.hidden = hidden, pa.row_threads = row_kernel_threads(hidden), pa.eps_n = 1e-6f;
  pa.next_pre_mix = b.pre, pa.next_norm_weight = b.norm_weight;
  pa.next_layer_input = b.layer_input_ref;
  return pa;
}

int dynamic_smem(const Variant& v, int hidden) {
  return v.stages * kStageBytes + kRows * (2 * hidden + 64);
}

// Sets up one variant's launch at `tokens`; false where it does not fit the device.
bool prepare(const Variant& v, const Buffers& b, int tokens, int hidden,
             const CoefficientParams& cp, Args& a, int& ctas) {
  const Kernel kernel = kernel_for(v);
  cudaFuncAttributes attr{};
  MHC_MICRO_CHECK(cudaFuncGetAttributes(&attr, kernel));
  int optin = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int smem = dynamic_smem(v, hidden);
  if (smem + int(attr.sharedSizeBytes) > optin) return false;
  int max_clusters = 0;
  MHC_MICRO_CHECK(max_active_clusters(kernel, v.cluster_ctas, threads_for(v), smem, &max_clusters));
  if (max_clusters < 1) return false;
  // hc_fn in this variant's B-fragment order.
  if (v.lane_cols == 4) {
    pack_hc_fn<4><<<528, 256>>>(b.hc_fn, hidden, b.packed);
  } else {
    pack_hc_fn<8><<<528, 256>>>(b.hc_fn, hidden, b.packed);
  }
  MHC_MICRO_CHECK(cudaGetLastError());
  const int64_t groups = ceil_div(ceil_div(tokens, kRows), v.cluster_ctas);
  a = Args{b.x,
           b.f,
           b.post,
           b.comb,
           b.pre,
           b.norm_weight,
           reinterpret_cast<const unsigned char*>(b.packed),
           b.x_next,
           b.layer_input,
           b.sums,
           cp,
           CoefficientOutputs{b.out_pre, b.out_post, b.out_comb, nullptr},
           tokens,
           hidden,
           1e-6f,
           v.cluster_ctas,
           int(std::min<int64_t>(groups, max_clusters))};
  ctas = a.clusters * v.cluster_ctas;
  return true;
}

void launch(const Variant& v, const Args& a, int ctas, int hidden) {
  MHC_MICRO_CHECK(launch_kernel_in_clusters(kernel_for(v), dim3(ctas), dim3(threads_for(v)),
                                            dynamic_smem(v, hidden), v.cluster_ctas,
                                            LaunchTarget(nullptr, false), a));
}

// Runs the variant once on poisoned outputs and checks it against the references; prints and
// returns false on any failure.
bool check(const Variant& v, const Buffers& b, int tokens, int hidden, const CoefficientParams& cp,
           int sms) {
  Args a;
  int ctas = 0;
  if (!prepare(v, b, tokens, hidden, cp, a, ctas)) return true;
  const int64_t x_elems = int64_t(tokens) * kStreams * hidden, li_elems = int64_t(tokens) * hidden;
  // The references: the row kernel's post + next input, then the sums and coefficients.
  const PostArgs pa = reference_post_args(b, hidden);
  MHC_MICRO_CHECK((launch_post<kStreams, true>(pa, tokens, LaunchTarget(nullptr, false))));
  MHC_MICRO_CHECK(cudaMemset(b.x_next, 0xff, x_elems * 2));  // poisoned: NaN in bf16 and fp32
  MHC_MICRO_CHECK(cudaMemset(b.layer_input, 0xff, li_elems * 2));
  MHC_MICRO_CHECK(cudaMemset(b.sums, 0xff, size_t(tokens) * kSums * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_pre, 0xff, size_t(tokens) * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_post, 0xff, size_t(tokens) * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.out_comb, 0xff, size_t(tokens) * kStreams * kStreams * 4));
  MHC_MICRO_CHECK(cudaMemset(b.fails, 0, sizeof(Failures)));
  launch(v, a, ctas, hidden);
  MHC_MICRO_CHECK(cudaGetLastError());
  compare_bits16<<<4 * sms, 256>>>(b.x_next_ref, b.x_next, x_elems, &b.fails->x_next, nullptr);
  compare_bits16<<<4 * sms, 256>>>(b.layer_input_ref, b.layer_input, li_elems,
                                   &b.fails->layer_input_any, &b.fails->layer_input_far);
  check_sums<<<tokens, 256>>>(b.x_next_ref, b.hc_fn, b.sums, hidden, b.fails);
  reference_coefficients<<<ceil_div(tokens, 128), 128>>>(
      b.sums, tokens, cp, b.params, CoefficientOutputs{b.ref_pre, b.ref_post, b.ref_comb, nullptr});
  compare_f32_bits<<<sms, 256>>>(b.ref_pre, b.out_pre, int64_t(tokens) * kStreams,
                                 &b.fails->coefficients);
  compare_f32_bits<<<sms, 256>>>(b.ref_post, b.out_post, int64_t(tokens) * kStreams,
                                 &b.fails->coefficients);
  compare_f32_bits<<<sms, 256>>>(b.ref_comb, b.out_comb, int64_t(tokens) * kStreams * kStreams,
                                 &b.fails->coefficients);
  MHC_MICRO_CHECK(cudaGetLastError());
  Failures f{};
  MHC_MICRO_CHECK(cudaMemcpy(&f, b.fails, sizeof f, cudaMemcpyDeviceToHost));
  const bool ok = f.x_next == 0 && f.layer_input_far == 0 && f.sums == 0 && f.coefficients == 0;
  std::printf(
      "check %-44s C=%d M=%-5d %s: x_next %llu wrong, layer_input %llu differ (%llu by more "
      "than 1 ulp), sums %llu off (max %.2e), coefficients %llu wrong\n",
      v.name, hidden, tokens, ok ? "PASS" : "FAIL", f.x_next, f.layer_input_any, f.layer_input_far,
      f.sums, double(f.max_sum_error), f.coefficients);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  mhc::bench::MicroOptions options;
  options.tokens = {2048, 4096, 8192};
  if (!mhc::bench::parse_micro_options(argc, argv, true, options)) return 2;
  const int hidden = options.hidden;
  const std::vector<int>& token_counts = options.tokens;
  const char* json_path = options.json_path;
  const std::string& commit = options.commit;
  const bool check_only = options.check_only;  // for compute-sanitizer: the checks, no timing
  std::vector<int> check_counts = {1, 13, 1003};
  if (hidden % kStageCols != 0 || hidden > 16384) {
    std::fprintf(stderr, "--hidden must be a multiple of %d up to 16384\n", kStageCols);
    return 2;
  }
  if (check_only) check_counts.clear();  // only --tokens
  int sms = 0, driver = 0;
  MHC_MICRO_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  MHC_MICRO_CHECK(cudaDriverGetVersion(&driver));
  cudaDeviceProp prop{};
  MHC_MICRO_CHECK(cudaGetDeviceProperties(&prop, 0));
  int max_tokens = 0;
  for (int m : token_counts) max_tokens = std::max(max_tokens, m);
  for (int m : check_counts) max_tokens = std::max(max_tokens, m);
  const size_t x_elems = size_t(max_tokens) * kStreams * hidden, li = size_t(max_tokens) * hidden;
  const size_t k_total = size_t(kStreams) * hidden;
  Buffers b{};
  b.x = device_alloc<uint16_t>(x_elems), b.x_next = device_alloc<uint16_t>(x_elems);
  b.x_next_ref = device_alloc<uint16_t>(x_elems);
  b.f = device_alloc<uint16_t>(li), b.layer_input = device_alloc<uint16_t>(li);
  b.layer_input_ref = device_alloc<uint16_t>(li);
  b.post = device_alloc<float>(max_tokens * kStreams),
  b.pre = device_alloc<float>(max_tokens * kStreams);
  b.comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.norm_weight = device_alloc<float>(hidden), b.hc_fn = device_alloc<float>(kNmix * k_total);
  b.packed = device_alloc<float>(kNmix * k_total), b.sums = device_alloc<float>(max_tokens * kSums);
  b.params = device_alloc<float>(kCoefficientParamFloats<kStreams>);
  for (float** p : {&b.out_pre, &b.out_post, &b.ref_pre, &b.ref_post}) {
    *p = device_alloc<float>(max_tokens * kStreams);
  }
  b.out_comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.ref_comb = device_alloc<float>(max_tokens * kStreams * kStreams);
  b.fails = device_alloc<Failures>(1);
  fill_bf16<<<4 * sms, 256>>>(b.x, x_elems, 1, -2.f, 2.f);
  fill_bf16<<<4 * sms, 256>>>(b.f, li, 2, -1.f, 1.f);
  fill_f32<<<sms, 256>>>(b.post, max_tokens * kStreams, 3, 0.f, 2.f);
  fill_f32<<<sms, 256>>>(b.comb, max_tokens * kStreams * kStreams, 4, 0.f, 0.5f);
  fill_f32<<<sms, 256>>>(b.pre, max_tokens * kStreams, 5, 0.f, 1.f);
  fill_f32<<<sms, 256>>>(b.norm_weight, hidden, 6, 0.5f, 1.5f);
  fill_f32<<<4 * sms, 256>>>(b.hc_fn, kNmix * k_total, 7, -0.02f, 0.02f);
  fill_f32<<<1, 32>>>(b.params, kNmix, 8, -0.5f, 0.5f);     // hc_base
  fill_f32<<<1, 32>>>(b.params + kNmix, 3, 9, 0.5f, 1.5f);  // hc_scale
  MHC_MICRO_CHECK(cudaGetLastError());
  CoefficientParams cp;
  cp.hc_base = b.params, cp.hc_scale = b.params + kNmix;
  cp.inv_k = 1.f / float(k_total);
  const std::vector<Variant> variants = {
      {"8-row tiles, 2 stages, 2 ahead, clusters of 4", 2, 2, 4},
      {"the same, ring arrivals released at cluster scope", 2, 2, 4, true},
      {"8-row tiles, 2 stages, 2 ahead, clusters of 8", 2, 2, 8},
      {"8-row tiles, 2 stages, 2 ahead, clusters of 2", 2, 2, 2},
      {"8-row tiles, 2 stages, 1 ahead, clusters of 4", 2, 1, 4},
      {"8-row tiles, 2 stages, 3 ahead, clusters of 4", 2, 3, 4},
      {"8-row tiles, 3 stages, 2 ahead, clusters of 4", 3, 2, 4},
      {"8 consumer warps (4 columns a lane), 2 ahead, clusters of 2", 2, 2, 2, false, 4},
      {"8 consumer warps (4 columns a lane), 2 ahead, clusters of 4", 2, 2, 4, false, 4},
      {"8 consumer warps (4 columns a lane), 3 ahead, clusters of 2", 2, 3, 2, false, 4},
  };
  bool all_pass = true;
  for (const Variant& v : variants) {
    for (int m : check_counts) all_pass = check(v, b, m, hidden, cp, sms) && all_pass;
    for (int m : token_counts) all_pass = check(v, b, m, hidden, cp, sms) && all_pass;
  }
  if (check_only) return all_pass ? 0 : 1;
  std::vector<mhc::bench::MicroRow> rows;
  std::printf("C = %d, n = %d\n%-64s %6s %6s %9s %7s\n", hidden, kStreams, "variant", "tokens",
              "CTAs", "us", "TB/s");
  for (int tokens : token_counts) {
    const double bytes = double(tokens) * hidden * 2 * 2 * (kStreams + 1);  // the floor's bytes
    const auto record = [&](const std::string& name, int ctas, float us) {
      rows.push_back({name, tokens, ctas, us, bytes / us * 1e-6});
      std::printf("%-64s %6d %6d %9.2f %7.3f\n", name.c_str(), tokens, ctas, us, bytes / us * 1e-6);
    };
    record(
        "cudaMemcpyAsync of the same bytes", 0,
        mhc::bench::median_launch_us(
            [&] {
              MHC_MICRO_CHECK(cudaMemcpyAsync(b.x_next_ref, b.x, size_t(tokens) * k_total * 2,
                                              cudaMemcpyDeviceToDevice));
              MHC_MICRO_CHECK(cudaMemcpyAsync(b.layer_input_ref, b.f, size_t(tokens) * hidden * 2,
                                              cudaMemcpyDeviceToDevice));
            },
            20));
    const PostArgs pa = reference_post_args(b, hidden);
    record("post + next input (row kernel, no coefficients)", tokens,
           mhc::bench::median_launch_us(
               [&] {
                 MHC_MICRO_CHECK(
                     (launch_post<kStreams, true>(pa, tokens, LaunchTarget(nullptr, false))));
               },
               20));
    for (const Variant& v : variants) {
      Args a;
      int ctas = 0;
      if (!prepare(v, b, tokens, hidden, cp, a, ctas)) continue;
      record(v.name, ctas, mhc::bench::median_launch_us([&] { launch(v, a, ctas, hidden); }, 20));
    }
  }
  if (json_path != nullptr) {
    mhc::bench::write_micro_json(
        json_path, "mhc_rowtile_boundary_microbench (dev/cuda/rowtile_boundary_microbench.cu)",
        prop, driver, commit, hidden, {{"checks_passed", all_pass}},
        "C = " + std::to_string(hidden) +
            ", n = 4: the whole-row tile prototype (post, collapse, norm, TF32 projection, "
            "stats) against the runtime's memcpy of the same bytes and the row kernel's post + "
            "next input; one launch per timing between CUDA events, 3 warm-ups, median of 20; "
            "TB/s = the fused floor's bytes (4C(n + 1) per token) / time; hc_fn's reads from L2 "
            "not counted",
        rows);
  }
  return all_pass ? 0 : 1;
}
