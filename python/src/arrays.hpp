// Argument checks of mhc._C on DLPack arrays (nb::ndarray): dtype, device, shape, contiguity,
// overlap. Every failure raises ValueError naming the argument and what was expected.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"

namespace mhc::python {

using Array = nanobind::ndarray<>;

enum class DType { f32, bf16, u8 };

// Where a call's arrays live: the CPU, or one CUDA device.
struct Device {
  bool cuda = false;
  int id = 0;
  bool operator==(const Device&) const = default;
};

[[noreturn]] void fail(const std::string& message);  // raises ValueError

// The CUDA kernels' shape limits (beyond validate()'s): n is 2 or 4, C a multiple of 64.
inline constexpr int kCudaStreams[] = {2, 4};
inline constexpr int kCudaHiddenMultiple = 64;

// A checked argument. bf16 arrays may also be given as uint16 (their bits: numpy has no bf16).
struct Checked {
  const char* name;
  Array array;
  void* data() const { return array.data(); }
  const Bf16* bf16() const { return static_cast<const Bf16*>(array.data()); }
  Bf16* bf16_out() const { return static_cast<Bf16*>(array.data()); }
  const float* f32() const { return static_cast<const float*>(array.data()); }
  float* f32_out() const { return static_cast<float*>(array.data()); }
  int64_t bytes() const;
};

// Takes `object` as an array (zero-copy), then checks dtype, C-contiguity and the shape (-1 in
// `shape` takes any extent). A CUDA array is exported with __dlpack__(stream=-1): the caller
// orders its streams (it passes the one to launch on), and the default export would make
// torch record an event and a wait on the legacy default stream for every argument, which
// costs time and breaks CUDA graph capture on any other stream.
Checked check(const char* name, nanobind::handle object, DType dtype,
              std::initializer_list<int64_t> shape);
int64_t extent(const Checked& arg, size_t dim);

// Checks that every argument is on `first`'s device and returns it.
Device same_device(std::initializer_list<const Checked*> args);

// Raises ValueError when the two arguments' memory ranges overlap.
void require_disjoint(const Checked& a, const Checked& b);

// A norm weight [C], fp32 or bf16, or None.
struct NormWeightArg {
  std::optional<Checked> arg;
  bool is_bf16 = false;
};
NormWeightArg check_norm_weight(const char* name, nanobind::handle object, int64_t hidden);

// The parameters of a call (validated: ValueError naming the bad one).
struct EpsArgs {
  std::optional<double> rms_eps, pre_eps, sinkhorn_eps, norm_eps;
};
MhcParams make_params(int64_t hidden, int64_t n, const EpsArgs& eps, double post_mult = 2.0,
                      int sinkhorn_iters = 20);

}  // namespace mhc::python
