// The checks of `mhc run` against the float64 reference: one site on fresh inputs, the head
// collapse, and each MTP block (docs/mtp.md). Pure computations on a backend, apart from the
// report that prints them (run_report.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "mhc/core/backend.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::cli {

// Errors of one site's five outputs against the float64 reference, on fresh random inputs
// with a carried (not one-hot) pre_mix.
struct SiteCheck {
  ErrorStats layer_input, pre, post, comb, x_next;
};
// Uses the weights of the model's second site (the first with a carried pre_mix).
SiteCheck check_one_site(Backend& backend, const ModelWeights& w, int64_t tokens, uint64_t seed);

// Errors of the head collapse (docs/head.md) against the float64 reference, on the stack's last
// streams: the collapse weights, the collapse alone, and the collapse with the final norm. `ran`
// false: the weights have no head (a checkpoint without hc_head_*).
struct HeadCheck {
  bool ran = false;
  ErrorStats weights, out, normed;
};
HeadCheck check_head(Backend& backend, const ModelWeights& w, const StackTrace& trace,
                     int64_t tokens);

// Runs a stack (one model's sites from x0) on the backend under test, as `mhc run` runs its trunk.
using StackRunner = std::function<StackTrace(const ModelWeights& w, const Bf16* x0)>;

// The stand-in of an MTP block's input (docs/mtp.md): e_proj(enorm(e)) + h_proj(hnorm(h)) with
// the projections and norms as identities, i.e. bf16(h_j + e) for each stream j, `h` [M, n, C] the
// streams before it (the trunk's last, or the previous block's), `e` the token's embedding (stream
// 0 of the trunk's x0 [M, n, C]).
std::vector<Bf16> mtp_input(const MhcParams& p, int64_t tokens, const Bf16* h, const Bf16* x0);

// One MTP block against the float64 reference: its second site on fresh inputs, its layer and
// the collapse after it (x, last pre, output), and its head collapse with its final norm.
struct MtpCheck {
  int depth = 0;
  SiteCheck site;
  ErrorStats x, last_pre, output;
  HeadCheck head;
};
// Every block of `blocks` in turn, each fed (mtp_input) from the streams before it: the backend's
// from the backend's `trunk` trace, the reference's from the reference's `trunk_ref`.
std::vector<MtpCheck> check_mtp(Backend& backend, const StackRunner& run,
                                const std::vector<ModelWeights>& blocks, const StackTrace& trunk,
                                const StackReference& trunk_ref, const Bf16* x0, int64_t tokens,
                                uint64_t seed);

}  // namespace mhc::cli
