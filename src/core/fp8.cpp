// The FP8 layer input's format checks (mhc/core/fp8.hpp).
#include "mhc/core/fp8.hpp"

#include <fmt/core.h>

#include "mhc/core/error.hpp"

namespace mhc {

void check_fp8_format(const Fp8Format& f, int64_t hidden, const char* what) {
  if (f.group_size != kFp8GroupSize) {
    throw Error(
        fmt::format("{}: group_size={} is not supported (the FP8 layer input takes "
                    "groups of {} columns)",
                    what, f.group_size, kFp8GroupSize));
  }
  if (hidden <= 0 || hidden % f.group_size != 0) {
    throw Error(fmt::format("{}: the hidden size {} is not a multiple of group_size={}", what,
                            hidden, f.group_size));
  }
}

}  // namespace mhc
