// The benchmark's stand-in for DeepSeek-V4.1-Flash's attention and MoE sublayers: two cuBLAS
// bf16 GEMMs per sublayer (C -> width -> C, fp32 accumulation), with distinct weights for every
// site so that, as in the real model at decode, each forward streams its weights from HBM.
//
// Why these sizes: at decode the sublayers' time is set by the weight bytes read per forward,
// not by FLOPs. V4-Flash (C=4096) reads about 0.1 GB of attention projections (FP8) and about
// 0.1 GB of active experts plus the shared expert (FP4) per layer. Two bf16 GEMMs of width W
// read 4*C*W bytes, so W = C for attention and W = 5C/4 for the MoE give the same order of
// bytes (0.10 and 0.13 GB at C=5120). Both widths can be changed (docs/overlap.md).
//
// With tensor parallelism (docs/tensor_parallel.md) each rank builds the stand-in with its
// StandinShard: the first GEMM is column-parallel ([C, W/tp]), the second row-parallel
// ([W/tp, C]), so operator() writes this rank's partial [M, C]; the caller all-reduces it. A
// rank's weights are exactly the slices of the TP=1 weights (same values, not a new draw).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"

namespace mhc::cuda {

struct StandinWidths {
  int attention = 0;  // 0: C
  int ffn = 0;        // 0: 5C/4 rounded up to a multiple of 64
  static StandinWidths for_params(const MhcParams& p, StandinWidths requested);
  int64_t weight_bytes_per_layer(const MhcParams& p) const;
};

// This rank's place in a TP group; the default is TP=1 (the whole sublayer).
struct StandinShard {
  int rank = 0;
  int world = 1;
};

class DecoderStandin {
 public:
  // Allocates every layer's weights (random, never zeros) and the GEMM workspace up front.
  // Throws mhc::Error when shard.world does not divide both widths.
  DecoderStandin(const MhcParams& p, int64_t max_tokens, StandinWidths widths,
                 StandinShard shard = {});
  ~DecoderStandin();
  DecoderStandin(const DecoderStandin&) = delete;
  DecoderStandin& operator=(const DecoderStandin&) = delete;

  // Site s: even sites are attention, odd sites the MoE stand-in. No allocation, capturable.
  // With TP > 1, `out` receives this rank's partial sum.
  void operator()(int site, int64_t tokens, const Bf16* layer_input, Bf16* out,
                  cudaStream_t stream) const;
  const StandinWidths& widths() const;  // full (TP=1) widths
  const StandinShard& shard() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mhc::cuda
