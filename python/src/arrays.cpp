#include "arrays.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "mhc/core/error.hpp"
#include "mhc/io/limits.hpp"

namespace nb = nanobind;

namespace mhc::python {

namespace {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32:
      return "float32";
    case DType::bf16:
      return "bfloat16 (or uint16 bits)";
    default:
      return "uint8";
  }
}

bool dtype_matches(const Array& a, DType d) {
  const nb::dlpack::dtype t = a.dtype();
  switch (d) {
    case DType::f32:
      return t == nb::dtype<float>();
    case DType::bf16:
      return t == nb::dtype<uint16_t>() ||
             (t.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && t.bits == 16 && t.lanes == 1);
    default:
      return t == nb::dtype<uint8_t>();
  }
}

std::string shape_text(const Array& a) {
  std::string text = "[";
  for (size_t i = 0; i < a.ndim(); ++i) text += (i ? ", " : "") + std::to_string(a.shape(i));
  return text + "]";
}

bool c_contiguous(const Array& a) {
  if (a.size() == 0) return true;  // nothing to lay out (numpy gives empty arrays odd strides)
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= int64_t(a.shape(i));
  }
  return true;
}

// DLPack device types of CUDA memory (kDLCUDA, kDLCUDAHost is CPU-readable: not here,
// kDLCUDAManaged).
constexpr int kDLCUDA = 2, kDLCUDAManaged = 13;

// Takes `object` as an array; false if it is not one. A CUDA array is exported with
// __dlpack__(stream=-1) (arrays.hpp says why), which raises for a torch tensor that requires grad.
bool try_import(nb::handle object, Array& array) {
  nb::object source = nb::borrow(object);
  if (!PyCapsule_CheckExact(object.ptr()) && nb::hasattr(object, "__dlpack_device__")) {
    const nb::tuple device = nb::cast<nb::tuple>(object.attr("__dlpack_device__")());
    const int type = nb::cast<int>(device[0]);
    if (type == kDLCUDA || type == kDLCUDAManaged) {
      source = object.attr("__dlpack__")(nb::arg("stream") = -1);
    }
  }
  return nb::try_cast(source, array);
}

bool requires_grad(nb::handle object) {
  return nb::hasattr(object, "requires_grad") && nb::cast<bool>(object.attr("requires_grad"));
}

Array import_array(const char* name, nb::handle object) {
  Array array;
  bool ok = false;
  try {
    ok = try_import(object, array);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_BufferError) || !requires_grad(object)) throw;
  }
  // A torch tensor that requires grad (an nn.Parameter) refuses DLPack export: the kernels only
  // read it, so it is taken through detach() (the same memory, no copy). Only on this path, so
  // other arrays pay nothing for it.
  if (!ok && requires_grad(object)) ok = try_import(object.attr("detach")(), array);
  if (!ok) {
    fail(fmt::format("{}: expected an array (torch, numpy, CuPy: anything with __dlpack__)", name));
  }
  return array;
}

}  // namespace

void fail(const std::string& message) { throw nb::value_error(message.c_str()); }

int64_t Checked::bytes() const { return int64_t(array.nbytes()); }

namespace {

Checked check_array(const char* name, const Array& array, DType dtype,
                    std::initializer_list<int64_t> shape) {
  if (!dtype_matches(array, dtype)) fail(fmt::format("{}: expected {}", name, dtype_name(dtype)));
  bool ok = array.ndim() == shape.size();
  size_t dim = 0;
  std::string expected = "[";
  for (int64_t extent : shape) {
    expected += (dim ? ", " : "") + (extent < 0 ? std::string("*") : std::to_string(extent));
    if (ok && extent >= 0 && int64_t(array.shape(dim)) != extent) ok = false;
    ++dim;
  }
  if (!ok) fail(fmt::format("{}: expected shape {}], got {}", name, expected, shape_text(array)));
  if (!c_contiguous(array)) fail(fmt::format("{}: must be C-contiguous", name));
  const int type = array.device_type();
  if (type != nb::device::cpu::value && type != nb::device::cuda::value) {
    fail(fmt::format("{}: must be on the CPU or a CUDA device", name));
  }
  return Checked{name, array};
}

}  // namespace

Checked check(const char* name, nb::handle object, DType dtype,
              std::initializer_list<int64_t> shape) {
  return check_array(name, import_array(name, object), dtype, shape);
}

int64_t extent(const Checked& arg, size_t dim) { return int64_t(arg.array.shape(dim)); }

Device same_device(std::initializer_list<const Checked*> args) {
  const Checked& first = **args.begin();
  const Device device{first.array.device_type() == nb::device::cuda::value,
                      first.array.device_id()};
  for (const Checked* arg : args) {
    const Device other{arg->array.device_type() == nb::device::cuda::value, arg->array.device_id()};
    if (!(other == device)) {
      fail(fmt::format("{}: on another device than {} (every array of a call must share one)",
                       arg->name, first.name));
    }
  }
  return device;
}

void require_disjoint(const Checked& a, const Checked& b) {
  const auto* a0 = static_cast<const char*>(a.data());
  const auto* b0 = static_cast<const char*>(b.data());
  if (a.bytes() == 0 || b.bytes() == 0) return;
  if (a0 < b0 + b.bytes() && b0 < a0 + a.bytes()) {
    fail(fmt::format("{} must not overlap {} in memory", a.name, b.name));
  }
}

NormWeightArg check_norm_weight(const char* name, nb::handle object, int64_t hidden) {
  NormWeightArg w;
  if (object.is_none()) return w;
  const Array array = import_array(name, object);
  w.is_bf16 = !(array.dtype() == nb::dtype<float>());
  w.arg = check_array(name, array, w.is_bf16 ? DType::bf16 : DType::f32, {hidden});
  return w;
}

MhcParams make_params(int64_t hidden, int64_t n, const EpsArgs& eps, double post_mult,
                      int sinkhorn_iters) {
  // Clamped into an int only: validate() then names the caller's own n and C (an extent past
  // the int range is reported at the range's end).
  constexpr int64_t lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
  MhcParams p;
  p.hidden = int(std::clamp<int64_t>(hidden, lo, hi));
  p.n = int(std::clamp<int64_t>(n, lo, hi));
  p.layers = 1;
  p.sinkhorn_iters = sinkhorn_iters;
  p.post_mult = post_mult;
  p.rms_eps_override = eps.rms_eps;
  p.pre_eps_override = eps.pre_eps;
  p.sinkhorn_eps_override = eps.sinkhorn_eps;
  p.norm_eps_override = eps.norm_eps;
  try {
    validate(p);
  } catch (const Error& e) {
    fail(e.what());
  }
  // The readers' limit on untrusted files (io/limits.hpp): 2^31 iterations would run for hours.
  if (sinkhorn_iters > io::kMaxSinkhornIters) {
    fail(
        fmt::format("sinkhorn_iters={} must be at most {}", sinkhorn_iters, io::kMaxSinkhornIters));
  }
  return p;
}

}  // namespace mhc::python
