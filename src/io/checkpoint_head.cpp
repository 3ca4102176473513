// The head collapse's tensors in a checkpoint (docs/head.md): named, and read and checked like
// the site tensors (F32, finite, the shapes the checkpoint's C and n give).
#include <fmt/core.h>

#include <array>
#include <string>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"

namespace mhc::ckpt {

std::string head_tensor_name(Naming naming, HeadSlot slot) {
  static constexpr std::array<const char*, 3> kOfficial{"hc_head_fn", "hc_head_base",
                                                        "hc_head_scale"};
  static constexpr std::array<const char*, 3> kHf{"model.hc_head.hc_fn", "model.hc_head.hc_base",
                                                  "model.hc_head.hc_scale"};
  return (naming == Naming::kHf ? kHf : kOfficial)[size_t(slot)];
}

HeadWeights read_head(TensorReader& reader, Naming naming, const MhcParams& p) {
  return read_head_named(
      reader,
      {head_tensor_name(naming, HeadSlot::kFn), head_tensor_name(naming, HeadSlot::kBase),
       head_tensor_name(naming, HeadSlot::kScale)},
      p);
}

HeadWeights read_head_named(TensorReader& reader, const std::array<std::string, 3>& names,
                            const MhcParams& p) {
  std::string listed, missing, first;
  for (const std::string& name : names) {
    const bool here = reader.listed(name);
    if (here && first.empty()) first = name;
    std::string& list = here ? listed : missing;
    list += (list.empty() ? "'" : ", '") + name + "'";
  }
  HeadWeights w;
  if (listed.empty()) return w;
  if (!missing.empty()) {
    throw Error(fmt::format("{}: the head collapse is incomplete: the checkpoint has {} but not {}",
                            reader.file_of(first), listed, missing));
  }
  const st::Dim n("n", p.n), k("n*C", p.k());
  w.hc_fn = reader.f32(names[0], {n, k});
  w.hc_base = reader.f32(names[1], {n});
  w.hc_scale = reader.f32(names[2], {kHeadScaleCount});
  return w;
}

}  // namespace mhc::ckpt
