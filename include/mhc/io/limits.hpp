// The limits the readers put on untrusted files, in one place (docs/limits.md lists them with what
// each bad input gets). Each is far above what a real file needs and far below what would exhaust
// the stack, memory or time.
#pragma once
#include <cstdint>

#include "mhc/core/json_input.hpp"
#include "mhc/core/params.hpp"

namespace mhc::io {

// safetensors: the reference implementation's header limit; a larger one is a corrupt length.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A shard of a published DeepSeek checkpoint holds a few thousand tensors and a whole unsharded
// V4 model ~150k; a million is a corrupt or hostile file.
inline constexpr uint64_t kMaxTensors = 1'000'000;
// A header needs 3 levels (header, entry, shape); a little more so that a nested value is reported
// as the wrong type rather than as too deep.
inline constexpr json_input::Limits kHeaderJson{8, kMaxTensors + 1, 4096};

// model.safetensors.index.json lists every tensor (~10 MB for a real checkpoint); config.json is
// a few KB. Both are read whole.
inline constexpr uint64_t kMaxJsonFileBytes = 256ull << 20;
inline constexpr json_input::Limits kIndexJson{8, 4'000'000, 4096};
// transformers' configs nest a few levels (rope_scaling, quantization_config).
inline constexpr json_input::Limits kConfigJson{64, 100'000, 4096};

// Sinkhorn iterations T from config.json or site metadata: mhc::validate's limit (V4.1 uses 20;
// more is a corrupt file, and T = 2^31 would run for hours).
inline constexpr int kMaxSinkhornIters = ::mhc::kMaxSinkhornIters;

}  // namespace mhc::io
