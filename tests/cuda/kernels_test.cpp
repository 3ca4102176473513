// Every CUDA kernel family against the float64 reference: fresh random inputs for every case
// (amplitudes 1e-3 .. 1e2, never zeros), outputs poisoned with 0xFF (NaN) before each run, so an
// unwritten or NaN output fails. Skips cleanly without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::case_name;
using test::DeviceCoefficients;
using test::DeviceWeights;
using test::poisoned;
using test::to_device;
using test::to_host;

const double kAmplitudes[] = {1e-3, 1e-1, 1.0, 1e2};

using test::download_coefficients;
using test::HostCoefficients;
using test::same_coefficients;

// Runs the coefficient path once on fresh random inputs and checks it against ref::coefficients.
void check_coefficients(const MhcParams& p, int64_t tokens, uint64_t seed, double amplitude,
                        Projection projection, LaunchOverrides o = {}) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const test::SiteCase c = test::random_site_case(p, tokens, seed, amplitude);
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, tokens);
  cuda::SiteWorkspace ws(p, tokens, max_prenorm_splits(p));
  o.projection = projection;
  const LaunchTuning tuning = test::tuning(p, tokens, o);
  cuda::prenorm_coefficients(p, tokens, out.buffers(x, w), tuning, ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  const HostCoefficients got = download_coefficients(out);

  ref::SiteResult want;
  ref::coefficients(p, tokens, c.x.data(), c.weights.view(), want);
  const double tol =
      (projection == Projection::fp32 ? kFp32Tolerances : kTf32Tolerances).coefficients;
  const std::string label = case_name(p, tokens, amplitude) + " " + tuning.describe();
  const int64_t m = tokens;
  const ErrorStats mixes = compare(got.mixes.data(), want.mixes.data(), m * p.nmix());
  const ErrorStats comb = compare(got.comb.data(), want.comb.data(), m * p.n * p.n);
  MHC_EXPECT_CLOSE(mixes, tol, label + " mixes");
  MHC_EXPECT_CLOSE(compare(got.pre.data(), want.pre.data(), m * p.n), tol, label + " pre");
  MHC_EXPECT_CLOSE(compare(got.post.data(), want.post.data(), m * p.n), tol, label + " post");
  MHC_EXPECT_CLOSE(comb, tol, label + " comb");
  std::printf("[ coef     ] %s: mixes %s | comb %s\n", label.c_str(), mixes.describe().c_str(),
              comb.describe().c_str());
}

struct Shape {
  int n;
  int hidden;
};
const Shape kModelShapes[] = {{2, 4096}, {2, 5120}, {2, 7168}, {4, 4096}, {4, 5120}, {4, 7168}};
const int64_t kSmallTokens[] = {1, 2, 3, 8, 13, 16, 17, 64, 137};

TEST(CudaCoefficients, Tf32AtEveryModelShape) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (const Shape s : kModelShapes) {
    const MhcParams p = test::small_params(s.n, s.hidden);
    for (int64_t m : kSmallTokens) {
      ++seed;
      check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::tf32);
    }
  }
}

TEST(CudaCoefficients, Fp32ProjectionAtEveryModelShape) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 200;
  for (const Shape s : kModelShapes) {
    const MhcParams p = test::small_params(s.n, s.hidden);
    for (int64_t m : {1, 13, 17, 137}) {
      ++seed;
      check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::fp32);
    }
  }
}

TEST(CudaCoefficients, LargeTokenCounts) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  uint64_t seed = 300;
  // 1536 and 1601: where the heuristic starts to pick the TMA kernel, with split counts (11 and
  // 10) that no explicit-tuning test uses.
  for (int64_t m : {1024, 1536, 1601, 4096, 8192}) {
    ++seed;
    check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::tf32);
  }
  check_coefficients(p, 1024, ++seed, 1.0, Projection::fp32);
  check_coefficients(test::small_params(2, 4096), 4096, ++seed, 1e2, Projection::tf32);
}

TEST(CudaCoefficients, EveryTilingAndSplitCount) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const int max_splits = max_prenorm_splits(p);
  uint64_t seed = 400;
  for (int rows : {16, 64}) {
    for (int splits : {1, 2, 7, 33, max_splits}) {
      for (int64_t m : {1, 17, 137}) {
        ++seed;
        check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::tf32,
                           test::forced(splits, rows));
      }
    }
  }
}

// The TMA kernel (sm_90, 128-token tiles) against the reference: partial tiles, token
// counts crossing 128/1024/2048, both stream counts and projections, one split and many.
TEST(CudaCoefficients, BulkCopyKernelEveryShape) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the TMA kernel");
  uint64_t seed = 450;
  for (const Shape s : kModelShapes) {
    const MhcParams p = test::small_params(s.n, s.hidden);
    for (int64_t m : {1, 129}) {
      ++seed;
      check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::tf32, test::forced(0, 128));
    }
  }
  const MhcParams p = test::small_params(4, 5120);
  for (int64_t m : {17, 1023, 2049}) {
    for (int splits : {1, 3, max_prenorm_splits(p)}) {
      ++seed;
      check_coefficients(p, m, seed, kAmplitudes[seed % 4], Projection::tf32,
                         test::forced(splits, 128));
    }
  }
  check_coefficients(p, 1025, ++seed, 1.0, Projection::fp32, test::forced(0, 128));
  check_coefficients(test::small_params(2, 7168), 2047, ++seed, 1e2, Projection::fp32,
                     test::forced(0, 128));
  // The register-fed kernel stays correct at large M (it serves GPUs without bulk copies).
  check_coefficients(p, 2049, ++seed, 1e-1, Projection::tf32, test::forced(0, 64));
}

// Small enough for compute-sanitizer (the 'Sanitize*' filter): the bulk-copy pipeline wrapping
// around its stages many times (one split over 32 stages), partial tiles, several splits.
TEST(SanitizeBulk, PipelineWrapsAndPartialTiles) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the TMA kernel");
  check_coefficients(test::small_params(4, 1024), 200, 470, 1.0, Projection::tf32,
                     test::forced(1, 128));
  check_coefficients(test::small_params(4, 1024), 130, 471, 1.0, Projection::fp32,
                     test::forced(3, 128));
  check_coefficients(test::small_params(2, 1024), 7, 472, 1.0, Projection::tf32,
                     test::forced(2, 128));
}

// Same inputs, 20 runs: bitwise identical outputs (fixed-order split-K and warp reductions),
// with one split and with the most, at token counts with partial tiles.
TEST(CudaCoefficients, BitwiseRepeatable) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  for (int64_t m : {13, 137, 4096}) {
    for (int splits : {1, max_prenorm_splits(p)}) {
      const test::SiteCase c = test::random_site_case(p, m, 500 + uint64_t(m), 1.0);
      const DeviceWeights w(c.weights);
      const auto x = to_device(c.x);
      cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
      const LaunchTuning tuning = test::tuning(p, m, test::forced(splits, 0));
      HostCoefficients first;
      for (int run = 0; run < 20; ++run) {
        const DeviceCoefficients out(p, m);
        cuda::prenorm_coefficients(p, m, out.buffers(x, w), tuning, ws, nullptr);
        MHC_CUDA_CHECK(cudaDeviceSynchronize());
        const HostCoefficients got = download_coefficients(out);
        if (run == 0) {
          first = got;
        } else {
          ASSERT_TRUE(same_coefficients(got, first))
              << "M=" << m << " splits=" << splits << " run " << run;
        }
      }
    }
  }
}

// Graph replays give the eager result bit for bit (the per-tile counters re-arm themselves).
TEST(CudaCoefficients, GraphReplayMatchesEager) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const int64_t m = 17;
  const test::SiteCase c = test::random_site_case(p, m, 600, 1.0);
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  const DeviceCoefficients eager(p, m), graphed(p, m);
  const LaunchTuning tuning = test::tuning(p, m);
  cuda::prenorm_coefficients(p, m, eager.buffers(x, w), tuning, ws, nullptr);
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cuda::prenorm_coefficients(p, m, graphed.buffers(x, w), tuning, ws, stream);
  MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  MHC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    MHC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(same_coefficients(download_coefficients(graphed), download_coefficients(eager)))
        << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(CudaCoefficients, RefusesAnotherHiddenSizeAndBadTuning) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  const test::SiteCase c = test::random_site_case(p, 4, 700, 1.0);
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const DeviceCoefficients out(p, 4);
  cuda::SiteWorkspace ws(p, 4, max_prenorm_splits(p));
  const MhcParams other = test::small_params(4, 4096);
  const LaunchTuning tuning = test::tuning(p, 4);
  // A workspace of another C, and a tuning resolved for another C.
  EXPECT_THROW(
      cuda::prenorm_coefficients(other, 4, out.buffers(x, w), test::tuning(other, 4), ws, nullptr),
      Error);
  EXPECT_THROW(cuda::prenorm_coefficients(other, 4, out.buffers(x, w), tuning, ws, nullptr), Error);
  // Split counts outside 1..K/256: refused by the resolution, and by the launcher where a tuning
  // was edited after it.
  EXPECT_THROW(test::tuning(p, 4, test::forced(max_prenorm_splits(p) + 1, 0)), Error);
  LaunchOverrides none;
  none.splits = 0;
  EXPECT_THROW(test::tuning(p, 4, none), Error);
  LaunchTuning edited = tuning;
  edited.splits = max_prenorm_splits(p) + 1;
  EXPECT_THROW(cuda::prenorm_coefficients(p, 4, out.buffers(x, w), edited, ws, nullptr), Error);
  EXPECT_THROW(cuda::prenorm_coefficients(p, 5, out.buffers(x, w), test::tuning(p, 5), ws, nullptr),
               Error);  // more tokens than the workspace
  EXPECT_THROW(cuda::SiteWorkspace(test::small_params(3, 5120), 4, 1), Error);
  EXPECT_THROW(cuda::SiteWorkspace(test::small_params(4, 5000), 4, 1), Error);
  EXPECT_THROW(cuda::input_path(test::small_params(4, 5000), 1, x.get(), nullptr, nullptr, nullptr,
                                {nullptr, false}),
               Error);
}

TEST(CudaKernels, ZeroTokensIsANoOp) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  cuda::SiteWorkspace ws(p, 16, 4);
  const LaunchTuning none = test::tuning(p, 0);
  EXPECT_NO_THROW(cuda::prenorm_coefficients(p, 0, {}, none, ws, nullptr));
  EXPECT_NO_THROW(cuda::input_path(p, 0, nullptr, nullptr, nullptr, nullptr, {nullptr, none.pdl}));
  EXPECT_NO_THROW(
      cuda::post(p, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, none, nullptr));
  EXPECT_NO_THROW(cuda::standin_sublayer(p, 0, nullptr, nullptr, nullptr, {nullptr, none.pdl}));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

void check_input_path(const MhcParams& p, int64_t m, uint64_t seed, double amplitude,
                      bool with_norm) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const test::SiteCase c = test::random_site_case(p, m, seed, amplitude);
  const auto x = to_device(c.x);
  const auto pre_mix = to_device(c.pre_mix);
  const auto norm = to_device(c.weights.norm_weight);
  auto out = poisoned<Bf16>(size_t(m * p.hidden));
  cuda::input_path(p, m, x.get(), pre_mix.get(), with_norm ? norm.get() : nullptr, out.get(),
                   {nullptr, test::device_plan().pdl});
  const std::vector<Bf16> got = to_host(out);
  const std::vector<double> want =
      with_norm ? ref::input_path(p, m, c.x.data(), c.pre_mix.data(), c.weights.norm_weight.data())
                : [&] {  // plain collapse
                    std::vector<double> y(size_t(m * p.hidden), 0.0);
                    for (int64_t t = 0; t < m; ++t)
                      for (int j = 0; j < p.n; ++j)
                        for (int64_t k = 0; k < p.hidden; ++k)
                          y[size_t(t * p.hidden + k)] +=
                              double(c.pre_mix[size_t(t * p.n + j)]) *
                              bf16_to_float(c.x[size_t((t * p.n + j) * p.hidden + k)]);
                    return y;
                  }();
  MHC_EXPECT_CLOSE(compare(got.data(), want.data(), m * p.hidden), kTf32Tolerances.activations,
                   case_name(p, m, amplitude) + (with_norm ? " layer_input" : " collapse"));
}

TEST(CudaInputPath, MatchesReference) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 800;
  for (const Shape s : kModelShapes) {
    for (int64_t m : {1, 3, 17, 137}) {
      ++seed;
      check_input_path(test::small_params(s.n, s.hidden), m, seed, kAmplitudes[seed % 4], true);
    }
  }
  check_input_path(test::small_params(4, 5120), 4096, ++seed, 1.0, true);
  check_input_path(test::small_params(4, 64), 5, ++seed, 1.0, true);  // one partial warp
  check_input_path(test::small_params(2, 5120), 9, ++seed, 1e2, false);
}

// A post's inputs: a random site case and random post/comb coefficients, host and device.
struct PostCase {
  test::SiteCase c;
  std::vector<float> post_coef, comb;
  cuda::DeviceBuffer<Bf16> x, f;
  cuda::DeviceBuffer<float> post_d, comb_d;
  PostCase(const MhcParams& p, int64_t m, uint64_t seed, double amplitude)
      : c(test::random_site_case(p, m, seed, amplitude)),
        post_coef(size_t(m * p.n)),
        comb(size_t(m * p.n * p.n)) {
    test::TestRng rng(seed * 7 + 1);
    for (float& v : post_coef) v = float(rng.uniform(0.0, 2.0));
    for (float& v : comb) v = float(rng.uniform(0.0, 1.0));
    x = to_device(c.x);
    f = to_device(c.sublayer_out);
    post_d = to_device(post_coef);
    comb_d = to_device(comb);
  }
};

// Post alone and post fused with the next input path, against ref::post (and ref::input_path on
// the bf16-stored reference x_next).
// cluster: the post + next input by clusters forced on or off (none: the device plan's).
void check_post(const MhcParams& p, int64_t m, uint64_t seed, double amplitude, bool fused,
                std::optional<bool> cluster = std::nullopt) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const PostCase in(p, m, seed, amplitude);
  const test::SiteCase& c = in.c;
  const auto next_pre = to_device(c.pre_mix);
  const auto next_norm = to_device(c.weights.norm_weight);
  auto x_next = poisoned<Bf16>(size_t(m * p.k()));
  auto next_input = poisoned<Bf16>(size_t(m * p.hidden));
  const cuda::NextInput next{next_pre.get(), next_norm.get(), next_input.get()};
  LaunchOverrides o;
  o.cluster_post = cluster;
  cuda::post(p, m, in.x.get(), in.post_d.get(), in.comb_d.get(), in.f.get(), x_next.get(),
             fused ? &next : nullptr, test::tuning(p, m, o), nullptr);
  const std::vector<Bf16> got = to_host(x_next);

  const std::vector<double> post_ref(in.post_coef.begin(), in.post_coef.end());
  const std::vector<double> comb_ref(in.comb.begin(), in.comb.end());
  const std::vector<double> want =
      ref::post(p, m, c.x.data(), post_ref.data(), comb_ref.data(), c.sublayer_out.data());
  const std::string label = case_name(p, m, amplitude);
  MHC_EXPECT_CLOSE(compare(got.data(), want.data(), m * p.k()), kTf32Tolerances.activations,
                   label + " x_next");
  if (!fused) return;
  std::vector<Bf16> want_stored(want.size());
  for (size_t i = 0; i < want.size(); ++i) want_stored[i] = float_to_bf16(float(want[i]));
  const std::vector<double> want_next =
      ref::input_path(p, m, want_stored.data(), c.pre_mix.data(), c.weights.norm_weight.data());
  MHC_EXPECT_CLOSE(compare(to_host(next_input).data(), want_next.data(), m * p.hidden),
                   kTf32Tolerances.activations, label + " next layer_input");
}

TEST(CudaPost, MatchesReference) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  for (const Shape s : kModelShapes) {
    // 64 and 65: both sides of the plan's limit for the column kernel (post_columns_max_tokens).
    for (int64_t m : {1, 13, 64, 65, 137}) {
      ++seed;
      check_post(test::small_params(s.n, s.hidden), m, seed, kAmplitudes[seed % 4], false);
    }
  }
  check_post(test::small_params(4, 5120), 4096, ++seed, 1.0, false);
}

// The plain post by columns and by rows (LaunchTuning::post_columns) cut the row differently but
// compute each element with the same formula: at the same token counts, on both sides of the
// plan's limit, they must agree bitwise, from two different kernels.
TEST(CudaPost, ColumnAndRowKernelsGiveTheSameBits) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 950;
  for (const Shape s : kModelShapes) {
    if (!test::kernels_built_for(s.n)) continue;  // n = 2 without -DMHC_KERNELS_N2
    const MhcParams p = test::small_params(s.n, s.hidden);
    for (int64_t m : {1, 64, 65, 300}) {
      const PostCase in(p, m, ++seed, 1.0);
      const auto run = [&](bool by_columns, Bf16* out, cudaStream_t st) {
        LaunchOverrides o;
        o.post_columns = by_columns;
        const LaunchTuning t = test::tuning(p, m, o);
        ASSERT_EQ(t.post_columns, by_columns) << m << " tokens";
        cuda::post(p, m, in.x.get(), in.post_d.get(), in.comb_d.get(), in.f.get(), out, nullptr, t,
                   st);
      };
      auto by_rows = poisoned<Bf16>(size_t(m * p.k()));
      auto by_columns = poisoned<Bf16>(size_t(m * p.k()));
      run(false, by_rows.get(), nullptr);
      run(true, by_columns.get(), nullptr);
      EXPECT_TRUE(test::same_finite_bits(to_host(by_rows), to_host(by_columns)))
          << case_name(p, m, 1.0);
      // Two kernels, or the comparison proves nothing: one launch each, of different functions.
      const auto kernel_of = [&](bool columns, Bf16* out) {
        const auto launched =
            test::captured_kernels([&](cudaStream_t st) { run(columns, out, st); });
        EXPECT_EQ(launched.size(), 1u) << m << " tokens";
        return launched.empty() ? nullptr : launched.front().func;
      };
      EXPECT_NE(kernel_of(false, by_rows.get()), kernel_of(true, by_columns.get()))
          << case_name(p, m, 1.0) << ": the same kernel both ways";
    }
  }
}

// Both kernels of the post + next input path: by row CTAs (cluster limit 0) and, where the image
// has clusters, by one cluster per token (no limit).
TEST(CudaPost, FusedWithNextInputPathMatchesReference) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 1000;
  for (const Shape s : kModelShapes) {
    for (int64_t m : {1, 13, 137}) {
      ++seed;
      for (bool cluster : {false, true}) {
        check_post(test::small_params(s.n, s.hidden), m, seed, kAmplitudes[seed % 4], true,
                   cluster);
      }
    }
  }
  check_post(test::small_params(4, 5120), 4096, ++seed, 1e-1, true);
}

// The largest C the row kernels launch at on this device (their register counts cap a CTA's
// threads, one per 32 columns; C = 16384 failed to launch on the H200 while the static limit said
// 32768): every row kernel runs there within the reference's bounds, and one 64-column step above
// is refused, the limit named, before a workspace is allocated.
TEST(CudaKernels, HiddenSizeLimitOfTheRowKernels) {
  MHC_SKIP_WITHOUT_GPU();
  const int limit = test::device_plan().row_kernels_max_hidden;
  ASSERT_GE(limit, 7168) << "below the DeepSeek-V4 shapes";
  ASSERT_LE(limit, 32768) << "one CTA of 1024 threads per token";
  EXPECT_EQ(limit % 64, 0);
  uint64_t seed = 1300;
  for (int n : test::built_streams()) {
    const MhcParams p = test::small_params(n, limit);
    check_post(p, 137, ++seed, 1.0, true, false);   // the row kernel with the next input path
    check_post(p, 137, ++seed, 1.0, false, false);  // the plain post's row kernel (above 64)
    check_input_path(p, 137, ++seed, 1.0, true);
  }
  if (limit < 32768) {
    try {
      cuda::SiteWorkspace ws(test::small_params(4, limit + 64), 4, 1);
      ADD_FAILURE() << "C=" << limit + 64 << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("limit " + std::to_string(limit)), std::string::npos)
          << e.what();
    }
  }
}

// The post + next input path by clusters (one per token, a row warp's vectors per CTA) and by
// row CTAs cut the row alike and add its RMS sum in the same order: x_next and layer_input agree
// bitwise, with a norm weight and without (a plain collapse); the cluster kernel is shown to have
// run (LaunchTuning::cluster_post), and the outputs were poisoned first.
void expect_cluster_post_gives_row_bits(const MhcParams& p, int64_t m, uint64_t seed) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const PostCase in(p, m, seed, kAmplitudes[seed % 4]);
  const auto pre = to_device(in.c.pre_mix);
  const auto norm = to_device(in.c.weights.norm_weight);
  for (bool with_norm : {true, false}) {
    std::vector<Bf16> x_next[2], layer_input[2];
    for (int by_cluster : {0, 1}) {
      auto xn = poisoned<Bf16>(size_t(m * p.k()));
      auto li = poisoned<Bf16>(size_t(m * p.hidden));
      const cuda::NextInput next{pre.get(), with_norm ? norm.get() : nullptr, li.get()};
      LaunchOverrides o;
      o.cluster_post = by_cluster == 1;
      const LaunchTuning t = test::tuning(p, m, o);
      ASSERT_EQ(t.cluster_post, by_cluster == 1);
      cuda::post(p, m, in.x.get(), in.post_d.get(), in.comb_d.get(), in.f.get(), xn.get(), &next, t,
                 nullptr);
      x_next[by_cluster] = to_host(xn);
      layer_input[by_cluster] = to_host(li);
    }
    const std::string label = case_name(p, m, 1.0) + (with_norm ? " norm" : " no norm");
    EXPECT_TRUE(test::same_finite_bits(x_next[0], x_next[1])) << label << " x_next";
    EXPECT_TRUE(test::same_finite_bits(layer_input[0], layer_input[1])) << label << " layer_input";
  }
}

bool image_has_clusters() {
  const KernelPlan& plan = test::device_plan();
  return plan.image && plan.image->has_sm90_instructions();
}

TEST(CudaPost, ClusterAndRowKernelsGiveTheSameBits) {
  MHC_SKIP_WITHOUT_GPU();
  MHC_SKIP_UNLESS(image_has_clusters(), "the loaded image has no thread block clusters");
  uint64_t seed = 970;
  for (const Shape s : kModelShapes) {
    for (int64_t m : {1, 2, 7, 17, 64}) {
      expect_cluster_post_gives_row_bits(test::small_params(s.n, s.hidden), m, ++seed);
    }
  }
}

// The default dispatch follows the plan: clusters up to cluster_post_max_tokens where the row
// fits a cluster (C <= 8192), the row kernel above the limit and for wider rows.
TEST(CudaPost, ClusterPostFollowsThePlanLimit) {
  MHC_SKIP_WITHOUT_GPU();
  const int64_t limit = test::device_plan().cluster_post_max_tokens;
  MHC_SKIP_UNLESS(image_has_clusters() && limit > 0, "no cluster post on this device");
  for (const Shape s : kModelShapes) {
    const MhcParams p = test::small_params(s.n, s.hidden);
    EXPECT_TRUE(test::tuning(p, 1).cluster_post) << s.hidden;
    EXPECT_TRUE(test::tuning(p, limit).cluster_post) << s.hidden;
    EXPECT_FALSE(test::tuning(p, limit + 1).cluster_post) << s.hidden;
  }
  EXPECT_TRUE(test::tuning(test::small_params(4, 8192), 1).cluster_post);
  // One 64-column step wider: the row kernel where this device's row kernels reach that far (their
  // register counts set the limit, HiddenSizeLimitOfTheRowKernels), else refused with the limit.
  const MhcParams wide = test::small_params(4, 8256);
  if (wide.hidden <= test::device_plan().row_kernels_max_hidden) {
    EXPECT_FALSE(test::tuning(wide, 1).cluster_post)
        << "a row of 9 warps does not fit a portable cluster";
  } else {
    EXPECT_THROW(test::tuning(wide, 1), Error);
  }
}

// For compute-sanitizer (device-validate runs Sanitize*): clusters of 2 and 5 CTAs, small.
TEST(SanitizeClusterPost, TwoAndFiveCtaClusters) {
  MHC_SKIP_WITHOUT_GPU();
  MHC_SKIP_UNLESS(image_has_clusters(), "the loaded image has no thread block clusters");
  for (int hidden : {2048, 5120}) {
    for (int64_t m : {1, 3})
      expect_cluster_post_gives_row_bits(test::small_params(4, hidden), m, 990);
  }
}

TEST(CudaStandin, MatchesDefinition) {
  MHC_SKIP_WITHOUT_GPU();
  const MhcParams p = test::small_params(4, 5120);
  for (int64_t m : {1, 17, 300}) {
    test::TestRng rng(1100 + uint64_t(m));
    const std::vector<Bf16> input = test::random_bf16(size_t(m * p.hidden), rng, 3.0);
    std::vector<float> gain(size_t(p.hidden));
    for (float& g : gain) g = float(rng.uniform(-0.7, 0.7));
    const auto input_d = to_device(input);
    const auto gain_d = to_device(gain);
    auto out = poisoned<Bf16>(input.size());
    cuda::standin_sublayer(p, m, input_d.get(), gain_d.get(), out.get(),
                           {nullptr, test::device_plan().pdl});
    const std::vector<Bf16> got = to_host(out);
    std::vector<Bf16> want(input.size());
    standin_sublayer(p, m, input.data(), gain.data(), want.data());
    EXPECT_TRUE(test::same_bits(got, want)) << "M=" << m;
  }
}

}  // namespace
}  // namespace mhc
