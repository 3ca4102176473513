// A whole model's mHC parameters, the deterministic synthetic model used by `mhc run`, the
// stand-in sublayer, and the stack driver shared by every backend's validation.
//
// Stack semantics (design doc, step 5): x0 = n copies of the embedding, pre_mix one-hot on
// stream 0; for each site s: layer_input = input_path(x, pre_mix), F = standin(layer_input),
// (pre, post, comb) = coefficients(x), x = post(x, post, comb, F), pre_mix = pre. After the last
// site: out = final_collapse(x, pre_mix, final_norm).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/head_views.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc {

struct ModelWeights {
  MhcParams params;
  std::vector<SiteWeights> sites;  // 2 * layers: attention site, FFN site, ...
  std::vector<float> final_norm;   // [C]
  HeadWeights head;  // the head collapse (docs/head.md); empty when a checkpoint has none
  std::vector<std::vector<float>> standin_gain;  // per site [C]: the stand-in sublayer's weights
};

// Deterministic synthetic weights (same seed, same bits on every machine).
// Scaled like a trained model: mixes of order 1, comb logits favouring the identity.
ModelWeights synthetic_model(const MhcParams& p, uint64_t seed);

// x0 [M, n, C]: n copies of a deterministic random embedding per token.
std::vector<Bf16> synthetic_embeddings(const MhcParams& p, int64_t tokens, uint64_t seed);

// pre_mix of the first site: one-hot on stream 0, [M, n].
std::vector<float> first_site_pre_mix(const MhcParams& p, int64_t tokens);

// The stand-in sublayer (cheap, deterministic, elementwise so every backend computes it the same
// way): F[m][c] = bf16(gain[c] * layer_input[m][c]).
void standin_sublayer(const MhcParams& p, int64_t tokens, const Bf16* layer_input,
                      const float* gain, Bf16* out);

// What a stack run leaves for validation.
struct StackTrace {
  std::vector<std::vector<Bf16>> x_after_layer;  // [layers][M, n, C] (after the FFN site)
  std::vector<float> last_pre;                   // [M, n]
  std::vector<Bf16> output;                      // [M, C]: final collapse + final norm
};

// Float64 reference of the stack: x carried as bf16-rounded doubles (the model stores bf16),
// everything else in double.
struct StackReference {
  std::vector<std::vector<double>> x_after_layer;
  std::vector<double> last_pre;
  std::vector<double> output;
};
// Told after each site of a stack that is computed site by site, with the count done so far (1 ..
// 2 * layers): how `mhc run` shows its progress. Empty: nothing is told.
using SiteDone = std::function<void(int sites_done)>;

StackReference reference_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                               const SiteDone& after_site = {});

// The fp32 CPU backend's stack.
StackTrace cpu_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                     const SiteDone& after_site = {});

}  // namespace mhc
