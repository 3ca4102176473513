// Host API of the head collapse (hc_head, docs/head.md) on device pointers: a checked launcher,
// host-only, over the kernel of mhc/cuda/head.cuh (compiled once, in src/cuda/head.cu). It
// throws mhc::Error on a bad shape or pointer and on a CUDA launch error; zero tokens is a no-op;
// it allocates nothing (head_on_host, for validation, does).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "mhc/core/bf16.hpp"
#include "mhc/core/head_views.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/launch_target.hpp"

namespace mhc::cuda {

struct HeadBuffers {                   // device pointers (layouts: mhc/core/head_views.hpp)
  const Bf16* x = nullptr;             // [M, n, C], 16-byte aligned
  const float* hc_fn = nullptr;        // [n, n*C], 16-byte aligned
  const float* hc_base = nullptr;      // [n]
  const float* hc_scale = nullptr;     // [1]
  const float* norm_weight = nullptr;  // [C], 16-byte aligned: the final RMSNorm fused; null: none
  Bf16* out = nullptr;                 // [M, C], 16-byte aligned, not overlapping x
  float* weights = nullptr;            // [M, n]: the collapse weights; null: not written
  const Bf16* norm_weight_bf16 = nullptr;  // [C] bf16, 16-byte aligned, instead of norm_weight
};

// The head's launch forms. The two CTA forms (mhc/cuda/head.cuh) give a token the same bits (one
// reduction order per token); the cluster form (mhc/cuda/sm90_head_cluster.cuh, sm_90) sums in
// another order: its own bits, the same in every batch. So kPlan takes the cluster form at every
// token count wherever it runs (head_cluster_planned), the CTA forms elsewhere.
enum class HeadForm {
  kPlan,          // the launcher's choice (head_form_for)
  kTokenPerCta,   // one token per CTA, its row kept in registers
  kTokensPerCta,  // kHeadTokensPerCta tokens per CTA, hc_fn read once for all of them
  kCluster,       // a cluster of kHeadClusterCtas CTAs per group of tokens, each CTA C/8 columns
};
inline constexpr int kHeadTokensPerCta = 8;
inline constexpr int kHeadClusterCtas = 8;  // fixed for every C and M: it sets the bits

// Whether the cluster form runs for n streams and hidden size C on the current device: its image
// has the sm_90 cluster instructions, C is a multiple of 8 * kHeadClusterCtas, and every group
// size's slices fit a CTA's shared memory.
bool head_cluster_fits(int n, int hidden);

// Whether kPlan launches the cluster form for (n, C) here: head_cluster_fits and the switch in
// src/cuda/head.cu (kHeadClusterFormOn), the same at every token count.
bool head_cluster_planned(int n, int hidden);

// The form kPlan launches for `tokens` tokens, with the cluster form planned (`cluster`) or not.
HeadForm head_form_for(int64_t tokens, bool cluster);

// The tokens per cluster group of the cluster form at M = `tokens` and hidden size C (speed only).
int head_cluster_tokens(int64_t tokens, int hidden);

// The largest hidden size the head kernel takes for n streams on the current device: CTAs of
// C / 32 threads, capped by the kernels' registers in the loaded image.
int head_max_hidden(int n);

// out = the head collapse of x (with the final norm where b.norm_weight or b.norm_weight_bf16 is
// set: a bf16 weight gives the bits of its fp32 widening), in one launch;
// epsilons from p: rms_eps() in the projection's RMS, pre_eps() added to the sigmoid (hc_eps),
// norm_eps() in the norm. n in {2, 4}, C a multiple of 64 up to head_max_hidden(n).
// `form` forces a launch form (tests and benchmarks compare them); kCluster where it does not fit
// is refused.
void head(const MhcParams& p, int64_t tokens, const HeadBuffers& b, LaunchTarget stream,
          HeadForm form = HeadForm::kPlan);

// The same on host buffers (the CUDA backend's Backend::run_head, for validation): copies x and
// the weights in, one launch on `stream`, copies out and the weights (unless null) back. Allocates
// its device buffers: not for a forward pass.
void head_on_host(const MhcParams& p, const HeadWeightsView& w, int64_t tokens, const Bf16* x,
                  Bf16* out, float* weights, cudaStream_t stream);

}  // namespace mhc::cuda
