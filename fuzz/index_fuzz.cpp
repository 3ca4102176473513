// libFuzzer target: the checkpoint index (model.safetensors.index.json) and config.json parsers,
// the layer-name matcher on every tensor name an accepted index holds, and the loader's layer
// checks (find_layers) on those names.
//
// Contract checked: no out-of-bounds access or undefined behaviour, bad input rejected only with
// mhc::Error, accepted shard names stay inside the checkpoint directory, a name the matcher
// accepts is exactly the name tensor_name() builds back, and layers and MTP blocks that
// find_layers accepts have every per-layer tensor listed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checkpoint_internal.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/io/checkpoint.hpp"

namespace {

using namespace mhc::ckpt;

void require(bool ok) {
  if (!ok) std::abort();
}

void check_index(const Index& index) {
  for (const auto& [name, shard] : index.weight_map) {
    require(!name.empty() && !shard.empty() && shard.front() != '/');
    require(shard != ".." && shard.rfind("../", 0) != 0 && shard.find("/../") == std::string::npos);
    require(shard.size() < 3 || shard.compare(shard.size() - 3, 3, "/..") != 0);
    for (Naming naming : {Naming::kOfficial, Naming::kHf}) {
      if (const auto m = match_layer_tensor(naming, name)) {
        require(tensor_name(naming, m->layer, m->slot) == name);
      }
    }
  }
}

void check_layers(const Index& index) {
  Source s;
  s.index_path = "fuzz.index.json";
  s.weight_map = index.weight_map;
  const Layers layers = find_layers(s);
  require(layers.count >= 1);
  for (int l = 0; l < layers.count; ++l) {
    for (int slot = 0; slot < kSlots; ++slot) {
      require(s.weight_map.count(tensor_name(layers.naming, l, Slot(slot))) == 1);
    }
  }
  require(layers.mtp_depths >= 0);
  for (int d = 0; d < layers.mtp_depths; ++d) {
    for (int slot = 0; slot < kSlots; ++slot) {
      require(s.weight_map.count(mtp_tensor_name(layers.naming, layers.count, d, Slot(slot))) == 1);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy so that ASan sees a read past the end of the text.
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const Index index = parse_index(text, "fuzz.index.json");
    check_index(index);
    check_layers(index);
  } catch (const mhc::Error&) {
  }
  try {
    const ConfigValues c = parse_config(text, "fuzz.config.json");
    require(!c.hc_sinkhorn_iters || (*c.hc_sinkhorn_iters >= 1 && *c.hc_sinkhorn_iters <= 1000));
    // Accepted epsilons lie in the range their fp32 arithmetic holds (mhc::param_ranges).
    require(!c.hc_eps || mhc::param_problem("eps_h", *c.hc_eps).empty());
    require(!c.rms_norm_eps || mhc::param_problem("eps_n", *c.rms_norm_eps).empty());
    require(!c.num_nextn_predict_layers || *c.num_nextn_predict_layers >= 0);
  } catch (const mhc::Error&) {
  }
  return 0;
}
