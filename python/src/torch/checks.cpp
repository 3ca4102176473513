#include "checks.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "mhc/core/params.hpp"
#include "mhc/core/workspace.hpp"

namespace mhc::torch_ops {

namespace {

constexpr int kCudaStreamsA = 2, kCudaStreamsB = 4;  // the CUDA kernels' n
constexpr int kCudaHiddenMultiple = 64;              // ... and their C
constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

struct DTypeName {
  int32_t code;
  const char* name;
};

// The names torch prints for a dtype (str(torch.float32) without "torch.").
const std::vector<DTypeName>& dtype_names() {
  static const std::vector<DTypeName> names = {
      {aoti_torch_dtype_float32(), "float32"},
      {aoti_torch_dtype_bfloat16(), "bfloat16"},
      {aoti_torch_dtype_float16(), "float16"},
      {aoti_torch_dtype_float64(), "float64"},
      {aoti_torch_dtype_uint8(), "uint8"},
      {aoti_torch_dtype_int8(), "int8"},
      {aoti_torch_dtype_int16(), "int16"},
      {aoti_torch_dtype_int32(), "int32"},
      {aoti_torch_dtype_int64(), "int64"},
      {aoti_torch_dtype_uint16(), "uint16"},
      {aoti_torch_dtype_uint32(), "uint32"},
      {aoti_torch_dtype_uint64(), "uint64"},
      {aoti_torch_dtype_bool(), "bool"},
      {aoti_torch_dtype_complex32(), "complex32"},
      {aoti_torch_dtype_complex64(), "complex64"},
      {aoti_torch_dtype_complex128(), "complex128"},
      {aoti_torch_dtype_float8_e4m3fn(), "float8_e4m3fn"},
      {aoti_torch_dtype_float8_e5m2(), "float8_e5m2"},
      {aoti_torch_dtype_float8_e4m3fnuz(), "float8_e4m3fnuz"},
      {aoti_torch_dtype_float8_e5m2fnuz(), "float8_e5m2fnuz"},
  };
  return names;
}

std::string dtype_text(int32_t code) {
  for (const DTypeName& d : dtype_names()) {
    if (d.code == code) return d.name;
  }
  return fmt::format("dtype {}", code);
}

std::string dtypes_text(DTypes d) {
  std::string text = dtype_text(d.codes[0]);
  for (int i = 1; i < d.count; ++i) text += " or " + dtype_text(d.codes[i]);
  return text;
}

template <typename List>
std::string list_text(const List& values) {
  std::string text = "[";
  bool first = true;
  for (int64_t v : values) {
    text += (first ? "" : ", ") + std::to_string(v);
    first = false;
  }
  return text + "]";
}

bool shape_is(const Tensor& t, Shape shape) {
  const auto sizes = t.sizes();
  if (sizes.size() != shape.size()) return false;
  size_t i = 0;
  for (int64_t extent : shape) {
    if (sizes[i++] != extent) return false;
  }
  return true;
}

bool has_dtype(int32_t code, DTypes d) {
  for (int i = 0; i < d.count; ++i) {
    if (d.codes[i] == code) return true;
  }
  return false;
}

[[noreturn]] void explain(const char* op, const char* name, const Tensor& t, DTypes dtypes,
                          Shape shape, const Where* device, const char* dims) {
  const int32_t dtype = dtype_of(t);
  if (!has_dtype(dtype, dtypes)) {
    fail(fmt::format("mhc.{}: {} has dtype {}, expected {}", op, name, dtype_text(dtype),
                     dtypes_text(dtypes)));
  }
  if (device && !(where(t) == *device)) {
    fail(
        fmt::format("mhc.{}: {} is on {} but residual is on {}; all tensors of a call must be "
                    "on one device",
                    op, name, where(t).text(), device->text()));
  }
  if (!shape_is(t, shape)) {
    fail(fmt::format("mhc.{}: {} has shape {}, expected {} = {}", op, name, list_text(t.sizes()),
                     dims, list_text(shape)));
  }
  fail(fmt::format("mhc.{}: {} is not contiguous (strides {}); pass .contiguous()", op, name,
                   list_text(t.strides())));
}

void shape_limits(const char* op, int64_t n, int64_t c, const Where& device) {
  if (!(1 <= n && n <= kMaxStreams)) {
    fail(fmt::format("mhc.{}: residual has n={} streams; n must be in 1..{}", op, n, kMaxStreams));
  }
  if (!(0 < c && c <= kMaxHidden && c % kHiddenMultiple == 0)) {
    fail(
        fmt::format("mhc.{}: residual has hidden size C={}; C must be a positive multiple of {} "
                    "and at most {}",
                    op, c, kHiddenMultiple, kMaxHidden));
  }
  if (device.cuda()) {
    if (n != kCudaStreamsA && n != kCudaStreamsB) {
      fail(fmt::format("mhc.{}: the CUDA kernels support n = 2 or 4 streams, got {}", op, n));
    }
    if (c % kCudaHiddenMultiple != 0) {
      fail(
          fmt::format("mhc.{}: the CUDA kernels need C (the last dimension) to be a multiple of "
                      "{}, got {}",
                      op, kCudaHiddenMultiple, c));
    }
  }
}

struct Span {
  const char* name;
  uintptr_t begin, end;
};

// The memory ranges of a call's tensors, on the stack (the checks run on every call).
struct Spans {
  static constexpr size_t kMost = 16;
  std::array<Span, kMost> items;
  size_t count = 0;

  void add(const Named& arg) {
    if (!arg.second) return;
    const int64_t elements = arg.second->numel();
    if (elements == 0) return;
    if (count == kMost) throw std::logic_error("mhc: more tensors than disjoint() holds");
    const auto begin = reinterpret_cast<uintptr_t>(arg.second->data_ptr());
    items[count++] = {arg.first, begin, begin + uintptr_t(elements) * arg.second->element_size()};
  }
};

bool overlap(const Span& a, const Span& b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace

void fail(const std::string& message) { throw std::runtime_error(message); }

std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest digits that read back as `value` (what Python's repr prints), laid out as repr
  // does: positional for decimal exponents -4..15, else d.ddde+XX.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string sign = sci[0] == '-' ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  if (-4 <= exponent && exponent < 16) {
    std::string text;
    if (exponent < 0) {
      text = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (size_t(exponent) + 1 >= digits.size()) {
      text = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      text = digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
    }
    return sign + text;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  return fmt::format("{}{}e{}{:02d}", sign, mantissa, exponent < 0 ? '-' : '+', std::abs(exponent));
}

std::string str_repr(const std::string& text) {
  const bool double_quotes =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char ch : text) {
    if (ch == '\\' || ch == quote) {
      out += '\\';
      out += char(ch);
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch < 0x20 || ch == 0x7f) {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += char(ch);
    }
  }
  return out + quote;
}

bool Where::cpu() const { return type == aoti_torch_device_type_cpu(); }
bool Where::cuda() const { return type == aoti_torch_device_type_cuda(); }

std::string Where::text() const {
  const char* name = "device";
  if (cpu()) return "cpu";
  if (type == aoti_torch_device_type_meta()) return "meta";
  if (cuda()) name = "cuda";
  if (type == aoti_torch_device_type_xpu()) name = "xpu";
  if (type == aoti_torch_device_type_mps()) name = "mps";
  return index < 0 ? std::string(name) : fmt::format("{}:{}", name, index);
}

Where where(const Tensor& t) {
  Where w;
  aoti_torch_get_device_type(t.get(), &w.type);
  aoti_torch_get_device_index(t.get(), &w.index);
  return w;
}

DTypes bf16() { return {{aoti_torch_dtype_bfloat16(), 0}, 1}; }
DTypes f32() { return {{aoti_torch_dtype_float32(), 0}, 1}; }
DTypes norm_weight_dtypes() {
  return {{aoti_torch_dtype_float32(), aoti_torch_dtype_bfloat16()}, 2};
}

int32_t dtype_of(const Tensor& t) {
  int32_t code = -1;
  aoti_torch_get_dtype(t.get(), &code);
  return code;
}

bool is_bf16(const Tensor& t) { return dtype_of(t) == aoti_torch_dtype_bfloat16(); }

void defined(const char* op, const char* name, const Tensor& t) {
  // The dispatcher passes None for a Tensor argument on as an undefined tensor.
  if (!t.defined()) fail(fmt::format("mhc.{}: {} must be a torch.Tensor, got NoneType", op, name));
}

void tensor(const char* op, const char* name, const Tensor& t, DTypes dtypes, Shape shape,
            const Where* device, const char* dims) {
  defined(op, name, t);
  if (has_dtype(dtype_of(t), dtypes) && (!device || where(t) == *device) && shape_is(t, shape) &&
      t.is_contiguous()) {
    return;
  }
  explain(op, name, t, dtypes, shape, device, dims);
}

void optional(const char* op, const char* name, const OptTensor& t, DTypes dtypes, Shape shape,
              const Where* device, const char* dims) {
  if (t) tensor(op, name, *t, dtypes, shape, device, dims);
}

Streams streams(const char* op, const Tensor& residual) {
  defined(op, "residual", residual);
  if (residual.dim() != 3) {
    fail(
        fmt::format("mhc.{}: residual has shape {}, expected [T, n, C] (tokens, streams, "
                    "hidden); flatten batch and sequence into T",
                    op, list_text(residual.sizes())));
  }
  const auto sizes = residual.sizes();
  const Streams s{sizes[0], sizes[1], sizes[2], where(residual)};
  tensor(op, "residual", residual, bf16(), {s.t, s.n, s.c}, nullptr, "[T, n, C]");
  runnable(op, s.dev);
  shape_limits(op, s.n, s.c, s.dev);
  return s;
}

void runnable(const char* op, const Tensor& residual) { runnable(op, where(residual)); }

void runnable(const char* op, const Where& w) {
  if (!w.cpu() && !w.cuda()) {
    fail(fmt::format("mhc.{}: residual is on {}; mhc runs on cpu and cuda", op, w.text()));
  }
}

// The range of an epsilon or post_mult (mhc::param_ranges, docs/limits.md), as _checks.param_range.
void param_range(const char* op, const char* name, double value) {
  const ParamRange& r = mhc::param_range(name);
  if (!(r.lo <= value && value <= r.hi)) {
    fail(
        fmt::format("mhc.{}: {} must be in [{:g}, {:g}], got {} (docs/limits.md, parameter ranges)",
                    op, name, r.lo, r.hi, float_text(value)));
  }
}

void finite_nonnegative(const char* op, const char* name, double value) {
  if (!(0.0 <= value && value < std::numeric_limits<double>::infinity())) {
    fail(fmt::format("mhc.{}: {} must be a finite number >= 0, got {}", op, name,
                     float_text(value)));
  }
  param_range(op, name, value);
}

void scalars(const char* op, double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
             int64_t sinkhorn_iters, const std::string& projection) {
  finite_nonnegative(op, "rms_eps", rms_eps);
  finite_nonnegative(op, "pre_eps", pre_eps);
  finite_nonnegative(op, "sinkhorn_eps", sinkhorn_eps);
  if (!std::isfinite(post_mult)) {
    fail(fmt::format("mhc.{}: post_mult must be a finite number, got {}", op,
                     float_text(post_mult)));
  }
  param_range(op, "post_mult", post_mult);
  if (!(1 <= sinkhorn_iters && sinkhorn_iters <= kMaxSinkhornIters)) {
    fail(fmt::format("mhc.{}: sinkhorn_iters must be >= 1 and <= {}, got {}", op, kMaxSinkhornIters,
                     sinkhorn_iters));
  }
  if (projection != "tf32" && projection != "fp32") {
    fail(fmt::format("mhc.{}: projection must be 'tf32' or 'fp32', got {}", op,
                     str_repr(projection)));
  }
}

void weights(const char* op, const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base,
             const Streams& s, const Where& device) {
  const int64_t nmix = s.n * (s.n + 2);
  tensor(op, "fn", fn, f32(), {nmix, s.n * s.c}, &device, "[n(n+2), n*C]");
  tensor(op, "hc_scale", hc_scale, f32(), {3}, &device, "[3]");
  tensor(op, "hc_base", hc_base, f32(), {nmix}, &device, "[n(n+2)]");
}

void coefficient_outputs(const char* op, const Tensor& post, const Tensor& comb,
                         const Tensor& next_pre_mix, const Streams& s, const Where& device,
                         const char* post_name, const char* comb_name, const char* pre_name) {
  tensor(op, post_name, post, f32(), {s.t, s.n}, &device, "[T, n]");
  tensor(op, comb_name, comb, f32(), {s.t, s.n, s.n}, &device, "[T, n, n]");
  tensor(op, pre_name, next_pre_mix, f32(), {s.t, s.n}, &device, "[T, n]");
}

Streams post_inputs(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                    const Tensor& post, const Tensor& comb) {
  const Streams s = streams(op, residual);
  const Where& dev = s.dev;
  tensor(op, "sublayer_out", sublayer_out, bf16(), {s.t, s.c}, &dev, "[T, C]");
  tensor(op, "post", post, f32(), {s.t, s.n}, &dev, "[T, n]");
  tensor(op, "comb", comb, f32(), {s.t, s.n, s.n}, &dev, "[T, n, n]");
  return s;
}

const Tensor* maybe(const OptTensor& t) { return t ? &*t : nullptr; }

void disjoint(const char* op, std::initializer_list<Named> outputs,
              std::initializer_list<Named> inputs) {
  Spans outs, ins;
  for (const Named& o : outputs) outs.add(o);
  for (const Named& i : inputs) ins.add(i);
  for (size_t i = 0; i < outs.count; ++i) {
    const Span& out = outs.items[i];
    for (size_t k = 0; k < ins.count; ++k) {
      const Span& other = ins.items[k];
      if (overlap(out, other)) {
        fail(
            fmt::format("mhc.{}: {} must not overlap {} (the kernel reads {} while writing {}); "
                        "use another buffer",
                        op, out.name, other.name, other.name, out.name));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (overlap(out, outs.items[j])) {
        fail(
            fmt::format("mhc.{}: {} must not overlap {} (both are outputs of the call); use "
                        "another buffer",
                        op, out.name, outs.items[j].name));
      }
    }
  }
}

Streams pre_args(const char* op, const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                 const Tensor& hc_base, const OptTensor& norm_weight, const OptTensor& pre_mix,
                 double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
                 int64_t sinkhorn_iters, double norm_eps, const std::string& projection,
                 bool scalars_bound) {
  const Streams s = streams(op, residual);
  const Where& dev = s.dev;
  weights(op, fn, hc_scale, hc_base, s, dev);
  optional(op, "norm_weight", norm_weight, norm_weight_dtypes(), {s.c}, &dev, "[C]");
  optional(op, "pre_mix", pre_mix, f32(), {s.t, s.n}, &dev, "[T, n]");
  if (scalars_bound) return s;
  scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection);
  finite_nonnegative(op, "norm_eps", norm_eps);
  return s;
}

void pre_outputs(const char* op, const Tensor& residual, const Tensor& layer_input,
                 const Tensor& post, const Tensor& comb, const Tensor& next_pre_mix) {
  const auto sizes = residual.sizes();
  const Streams s{sizes[0], sizes[1], sizes[2], where(residual)};
  tensor(op, "layer_input", layer_input, bf16(), {s.t, s.c}, &s.dev, "[T, C]");
  coefficient_outputs(op, post, comb, next_pre_mix, s, s.dev);
}

Streams coefficient_args(const char* op, const Tensor& residual, const Tensor& fn,
                         const Tensor& hc_scale, const Tensor& hc_base, double rms_eps,
                         double pre_eps, double sinkhorn_eps, double post_mult,
                         int64_t sinkhorn_iters, const std::string& projection,
                         bool scalars_bound) {
  const Streams s = streams(op, residual);
  weights(op, fn, hc_scale, hc_base, s, s.dev);
  if (!scalars_bound) {
    scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection);
  }
  return s;
}

Streams post_pre_args(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                      const Tensor& post, const Tensor& comb, const Tensor& next_pre_mix,
                      const OptTensor& next_norm_weight, double norm_eps) {
  const Streams s = post_inputs(op, sublayer_out, residual, post, comb);
  const Where& dev = s.dev;
  tensor(op, "next_pre_mix", next_pre_mix, f32(), {s.t, s.n}, &dev, "[T, n]");
  optional(op, "next_norm_weight", next_norm_weight, norm_weight_dtypes(), {s.c}, &dev, "[C]");
  finite_nonnegative(op, "norm_eps", norm_eps);
  return s;
}

Streams boundary_args(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                      const Tensor& post, const Tensor& comb, const Tensor& pre_mix,
                      const OptTensor& norm_weight, const Tensor& fn, const Tensor& hc_scale,
                      const Tensor& hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps,
                      const std::string& projection, bool scalars_bound) {
  const Streams s = post_inputs(op, sublayer_out, residual, post, comb);
  const Where& dev = s.dev;
  tensor(op, "pre_mix", pre_mix, f32(), {s.t, s.n}, &dev, "[T, n]");
  optional(op, "norm_weight", norm_weight, norm_weight_dtypes(), {s.c}, &dev, "[C]");
  if (!scalars_bound) finite_nonnegative(op, "norm_eps", norm_eps);
  weights(op, fn, hc_scale, hc_base, s, dev);
  if (!scalars_bound) {
    scalars(op, rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, projection);
  }
  return s;
}

void boundary_outputs(const char* op, const Tensor& residual, const Tensor& residual_next,
                      const Tensor& layer_input, const Tensor& next_post, const Tensor& next_comb,
                      const Tensor& next_pre_mix) {
  const auto sizes = residual.sizes();
  const Streams s{sizes[0], sizes[1], sizes[2], where(residual)};
  const Where& dev = s.dev;
  tensor(op, "residual_next", residual_next, bf16(), {s.t, s.n, s.c}, &dev, "[T, n, C]");
  tensor(op, "layer_input", layer_input, bf16(), {s.t, s.c}, &dev, "[T, C]");
  coefficient_outputs(op, next_post, next_comb, next_pre_mix, s, dev, "next_post", "next_comb",
                      "next_pre_mix");
}

GemmShape gemm_args(const Tensor& x, const Tensor& fn, const Tensor& out, const Tensor& sqrsum,
                    int64_t num_splits) {
  const char* op = "hc_prenorm_gemm";
  for (const Named& arg :
       {Named{"x", &x}, Named{"fn", &fn}, Named{"out", &out}, Named{"sqrsum", &sqrsum}}) {
    defined(op, arg.first, *arg.second);
  }
  if (x.dim() != 2) {
    fail(fmt::format("mhc.{}: x must be a [M, K] tensor, got shape {}", op, list_text(x.sizes())));
  }
  const int64_t m = x.sizes()[0], k = x.sizes()[1];
  tensor(op, "x", x, bf16(), {m, k}, nullptr, "[M, K]");
  if (fn.dim() != 2) {
    fail(
        fmt::format("mhc.{}: fn must be a [N, K] tensor, got shape {}", op, list_text(fn.sizes())));
  }
  const int64_t nmix = fn.sizes()[0];
  const Where dev = where(x);
  tensor(op, "fn", fn, f32(), {nmix, k}, &dev, "[N, K]");
  if (!(1 <= num_splits && num_splits <= kIntMax)) {
    fail(fmt::format("mhc.{}: num_splits must be >= 1 and <= {}, got {}", op, kIntMax, num_splits));
  }
  // DeepGEMM also takes [M, N] / [M] when there is one split.
  if (out.dim() == 3 || num_splits > 1) {
    tensor(op, "out", out, f32(), {num_splits, m, nmix}, &dev, "[num_splits, M, N]");
  } else {
    tensor(op, "out", out, f32(), {m, nmix}, &dev, "[M, N]");
  }
  if (sqrsum.dim() == 2 || num_splits > 1) {
    tensor(op, "sqrsum", sqrsum, f32(), {num_splits, m}, &dev, "[num_splits, M]");
  } else {
    tensor(op, "sqrsum", sqrsum, f32(), {m}, &dev, "[M]");
  }
  if (nmix != 8 && nmix != 16 && nmix != 24 && nmix != 32) {
    fail(fmt::format("mhc.{}: fn has N={} rows; N must be 8, 16, 24 or 32", op, nmix));
  }
  if (!(k > 0 && k % kPrenormSplitBlockK == 0)) {
    fail(fmt::format("mhc.{}: K={} must be a positive multiple of {}", op, k, kPrenormSplitBlockK));
  }
  return {m, nmix, k};
}

}  // namespace mhc::torch_ops
