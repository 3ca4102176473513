// The fp32 CPU site (design doc, "One site"): fp32 arithmetic and accumulation, bf16 storage.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "sinkhorn.hpp"

namespace mhc::cpu {

namespace {

std::atomic<int> g_threads{0};

// Independent partial sums of the fp32 reductions: enough to fill the vector registers, and the
// order of additions stays fixed (lane l adds elements l, l+16, ... in order).
constexpr int kLanes = 16;

// A thread start costs tens of microseconds; below this much work (multiply-adds) per thread it
// does not pay.
constexpr int64_t kMinWorkPerThread = int64_t{1} << 18;

// The projection works on tiles: kTokenBlock tokens times all NMIX rows, kChunk elements of K at
// a time, so the tokens' slices of v stay in L1 while each slice of hc_fn is read once per block.
// kChunk is a multiple of kLanes, so every lane sees its elements in the same order as in
// detail::dot: the tiling changes the speed, never the bits.
constexpr int64_t kTokenBlock = 4;
constexpr int64_t kChunk = 1024;
static_assert(kChunk % kLanes == 0);

float reduce_lanes(float* acc) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

void widen(const Bf16* in, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_float(in[i]);
}

void narrow(const float* in, int64_t count, Bf16* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = float_to_bf16(in[i]);
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

void check_call(const MhcParams& p, int64_t tokens, const char* what) {
  validate(p);
  if (tokens < 0) {
    throw Error(std::string(what) + ": token count " + std::to_string(tokens) + " is negative");
  }
}

// Adds a[i] * b[i] over the whole kLanes-groups of [begin, end) to the lanes (begin is a multiple
// of kLanes). The lanes live in a local array so the compiler keeps them in registers.
void accumulate_groups(float* acc, const float* a, const float* b, int64_t begin, int64_t end) {
  float lanes[kLanes];
  std::copy(acc, acc + kLanes, lanes);
  for (int64_t i = begin; i + kLanes <= end; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  std::copy(lanes, lanes + kLanes, acc);
}

// The last length % kLanes elements go to the first lanes.
void accumulate_tail(float* acc, const float* a, const float* b, int64_t length) {
  const int64_t start = length - length % kLanes;
  for (int l = 0; start + l < length; ++l) acc[l] += a[start + l] * b[start + l];
}

void require(const void* ptr, const char* what, const char* name) {
  if (ptr == nullptr) throw Error(std::string(what) + ": " + name + " is null");
}

// pre, post and comb of one token from its (already normalised) mixes.
void coefficients_of_token(const MhcParams& p, const SiteWeightsView& w, const float* mixes,
                           float* pre, float* post, float* comb) {
  const int n = p.n;
  const float pre_eps = float(p.pre_eps());
  const float post_mult = float(p.post_mult);
  const float* base = w.hc_base;
  const float* scale = w.hc_scale;
  for (int j = 0; j < n; ++j) {
    pre[j] = sigmoid(mixes[j] * scale[0] + base[j]) + pre_eps;
    post[j] = post_mult * sigmoid(mixes[n + j] * scale[1] + base[n + j]);
  }
  float logits[64];  // n <= 8 (validate)
  for (int i = 0; i < n * n; ++i) logits[i] = mixes[2 * n + i] * scale[2] + base[2 * n + i];
  sinkhorn(n, p.sinkhorn_iters, float(p.sinkhorn_eps()), logits, comb);
}

// mixes[t][i] = hc_fn[i] . v[t] for `count` tokens, in tiles (see kChunk); bitwise detail::dot.
void project_block(const float* hc_fn, int nmix, int64_t K, const float* v, int64_t count,
                   float* lanes, float* mixes) {
  std::fill(lanes, lanes + count * nmix * kLanes, 0.0f);
  const int64_t whole = K - K % kLanes;
  for (int64_t begin = 0; begin < whole; begin += kChunk) {
    const int64_t end = std::min(begin + kChunk, whole);
    for (int i = 0; i < nmix; ++i) {
      for (int64_t t = 0; t < count; ++t) {
        accumulate_groups(lanes + (t * nmix + i) * kLanes, hc_fn + i * K, v + t * K, begin, end);
      }
    }
  }
  for (int i = 0; i < nmix; ++i) {
    for (int64_t t = 0; t < count; ++t) {
      float* acc = lanes + (t * nmix + i) * kLanes;
      accumulate_tail(acc, hc_fn + i * K, v + t * K, K);
      mixes[t * nmix + i] = reduce_lanes(acc);
    }
  }
}

// Coefficients of tokens [begin, end), kTokenBlock tokens at a time.
void coefficients_range(const MhcParams& p, int64_t begin, int64_t end, const Bf16* x,
                        const SiteWeightsView& w, float* pre, float* post, float* comb,
                        float* mixes_out) {
  const int n = p.n;
  const int nmix = p.nmix();
  const int64_t K = p.k();
  // One allocation for a block's widened rows, mixes and lanes, for as many tokens as the range
  // has (up to a block), left uninitialised: every element is written before it is read
  // (project_block zeroes the lanes). At 1 token the zeroing of a 4-token block was a tenth of
  // the call.
  const int64_t block = std::min(kTokenBlock, end - begin);
  const auto scratch = std::make_unique_for_overwrite<float[]>(
      static_cast<size_t>(block * (K + nmix + nmix * kLanes)));
  float* const v = scratch.get();
  float* const mixes = v + block * K;
  float* const lanes = mixes + block * nmix;
  for (int64_t first = begin; first < end; first += kTokenBlock) {
    const int64_t count = std::min(kTokenBlock, end - first);
    for (int64_t t = 0; t < count; ++t) widen(x + (first + t) * K, K, v + t * K);
    project_block(w.hc_fn, nmix, K, v, count, lanes, mixes);
    for (int64_t t = 0; t < count; ++t) {
      const float* vt = v + t * K;
      float* mt = mixes + t * nmix;
      // The norm is applied after the GEMM (design doc): mixes = (hc_fn . v) * r.
      const float r = 1.0f / std::sqrt(detail::dot(vt, vt, K) / float(K) + float(p.rms_eps()));
      for (int i = 0; i < nmix; ++i) mt[i] *= r;
      const int64_t m = first + t;
      coefficients_of_token(p, w, mt, pre + m * n, post + m * n, comb + m * n * n);
      if (mixes_out != nullptr) std::copy(mt, mt + nmix, mixes_out + m * nmix);
    }
  }
}

}  // namespace

void set_threads(int threads) { g_threads.store(std::max(threads, 0)); }

int threads() {
  const int asked = g_threads.load();
  if (asked > 0) return asked;
  // Read once: std::thread::hardware_concurrency() reads /sys on every call (3 us here), which
  // every backend call would pay, one token or many.
  static const unsigned hardware = std::thread::hardware_concurrency();
  return std::clamp(int(hardware), 1, 8);
}

void detail::parallel_for(int64_t count, int64_t cost_per_item,
                          const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  const int64_t by_work = std::max<int64_t>(1, count * cost_per_item / kMinWorkPerThread);
  const int workers = int(std::min<int64_t>({int64_t(threads()), count, by_work}));
  if (workers <= 1) {
    fn(0, count);
    return;
  }
  const int64_t chunk = (count + workers - 1) / workers;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  auto run_chunk = [&](int worker) {
    const int64_t begin = worker * chunk;
    const int64_t end = std::min(count, begin + chunk);
    try {
      if (begin < end) fn(begin, end);
    } catch (...) {
      errors[size_t(worker)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int worker = 1; worker < workers; ++worker) pool.emplace_back(run_chunk, worker);
  run_chunk(0);
  for (auto& thread : pool) thread.join();
  for (auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

float detail::dot(const float* a, const float* b, int64_t length) {
  float acc[kLanes] = {};
  accumulate_groups(acc, a, b, 0, length);
  accumulate_tail(acc, a, b, length);
  return reduce_lanes(acc);
}

void detail::collapse_norm(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                           const float* norm_weight, Bf16* out) {
  const int n = p.n;
  const int64_t C = p.hidden;
  parallel_for(tokens, n * C, [&](int64_t begin, int64_t end) {
    std::vector<float> y(static_cast<size_t>(C));
    std::vector<Bf16> y_stored(static_cast<size_t>(C));
    for (int64_t m = begin; m < end; ++m) {
      std::fill(y.begin(), y.end(), 0.0f);
      for (int j = 0; j < n; ++j) {
        const float weight = pre_mix[m * n + j];
        const Bf16* xj = x + (m * n + j) * C;
        for (int64_t c = 0; c < C; ++c) y[c] += weight * bf16_to_float(xj[c]);
      }
      Bf16* out_m = out + m * C;
      if (norm_weight == nullptr) {
        narrow(y.data(), C, out_m);
        continue;
      }
      narrow(y.data(), C, y_stored.data());  // the model stores y as bf16 before the norm
      widen(y_stored.data(), C, y.data());
      const float rs =
          1.0f / std::sqrt(dot(y.data(), y.data(), C) / float(C) + float(p.norm_eps()));
      for (int64_t c = 0; c < C; ++c) y[c] = y[c] * rs * norm_weight[c];
      narrow(y.data(), C, out_m);
    }
  });
}

void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, Bf16* layer_input) {
  check_call(p, tokens, "cpu::input_path");
  if (tokens == 0) return;
  require(x, "cpu::input_path", "x");
  require(pre_mix, "cpu::input_path", "pre_mix");
  require(layer_input, "cpu::input_path", "layer_input");
  detail::collapse_norm(p, tokens, x, pre_mix, norm_weight, layer_input);
}

void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const SiteWeightsView& w,
                  float* pre, float* post, float* comb, float* mixes) {
  check_call(p, tokens, "cpu::coefficients");
  if (tokens == 0) return;
  for (const void* ptr :
       {(const void*)x, (const void*)w.hc_fn, (const void*)w.hc_base, (const void*)w.hc_scale,
        (const void*)pre, (const void*)post, (const void*)comb}) {
    require(ptr, "cpu::coefficients", "an input or output");
  }
  detail::parallel_for(tokens, p.nmix() * p.k(), [&](int64_t begin, int64_t end) {
    coefficients_range(p, begin, end, x, w, pre, post, comb, mixes);
  });
}

void sinkhorn(int n, int iters, float eps_h, const float* logits, float* comb) {
  ::mhc::cpu::detail::sinkhorn<float>(n, iters, eps_h, logits, comb);
}

void post(const MhcParams& p, int64_t tokens, const Bf16* x, const float* post, const float* comb,
          const Bf16* sublayer_out, Bf16* x_next) {
  check_call(p, tokens, "cpu::post");
  if (tokens == 0) return;
  for (const void* ptr : {(const void*)x, (const void*)post, (const void*)comb,
                          (const void*)sublayer_out, (const void*)x_next}) {
    require(ptr, "cpu::post", "an input or output");
  }
  const int n = p.n;
  const int64_t C = p.hidden;
  detail::parallel_for(tokens, n * n * C, [&](int64_t begin, int64_t end) {
    std::vector<float> f(static_cast<size_t>(C)), acc(static_cast<size_t>(C));
    for (int64_t m = begin; m < end; ++m) {
      widen(sublayer_out + m * C, C, f.data());
      const float* comb_m = comb + m * n * n;
      for (int k = 0; k < n; ++k) {
        const float post_k = post[m * n + k];
        for (int64_t c = 0; c < C; ++c) acc[c] = post_k * f[c];
        for (int j = 0; j < n; ++j) {
          const float weight = comb_m[j * n + k];  // row j of comb is the source stream
          const Bf16* xj = x + (m * n + j) * C;
          for (int64_t c = 0; c < C; ++c) acc[c] += weight * bf16_to_float(xj[c]);
        }
        narrow(acc.data(), C, x_next + (m * n + k) * C);
      }
    }
  });
}

void final_collapse(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre,
                    const float* norm_weight, Bf16* out) {
  check_call(p, tokens, "cpu::final_collapse");
  if (tokens == 0) return;
  require(x, "cpu::final_collapse", "x");
  require(pre, "cpu::final_collapse", "pre");
  require(out, "cpu::final_collapse", "out");
  detail::collapse_norm(p, tokens, x, pre, norm_weight, out);
}

void run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
              const SiteOutputsView& out) {
  input_path(p, in.tokens, in.x, in.pre_mix, w.norm_weight, out.layer_input);
  coefficients(p, in.tokens, in.x, w, out.pre, out.post, out.comb);
  post(p, in.tokens, in.x, out.post, out.comb, in.sublayer_out, out.x_next);
}

}  // namespace mhc::cpu
