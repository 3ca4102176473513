// Dtypes, shapes and shape expectations shared by the safetensors reader and writer.
#include <fmt/core.h>

#include <array>

#include "mhc/core/error.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st {

namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DtypeInfo, 16> kDtypes = {{
    {Dtype::BOOL, "BOOL", 1},
    {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E8M0, "F8_E8M0", 1},
    {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},
    {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},
    {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},
    {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
    {Dtype::F64, "F64", 8},
}};

const DtypeInfo& info(Dtype d) {
  for (const auto& e : kDtypes) {
    if (e.dtype == d) return e;
  }
  throw Error(fmt::format("invalid Dtype value {}", static_cast<int>(d)));
}

}  // namespace

std::string_view to_string(Dtype d) { return info(d).name; }

size_t dtype_size(Dtype d) { return info(d).size; }

std::optional<Dtype> parse_dtype(std::string_view s) {
  for (const auto& e : kDtypes) {
    if (e.name == s) return e.dtype;
  }
  return std::nullopt;
}

std::vector<Dtype> all_dtypes() {
  std::vector<Dtype> out;
  for (const auto& e : kDtypes) out.push_back(e.dtype);
  return out;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the reader has checked that this cannot overflow
  return n;
}

std::string format_shape(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + "]";
}

std::string Dim::to_string() const {
  if (size < 0) return label.empty() ? "*" : label;
  if (label.empty()) return fmt::format("{}", size);
  return fmt::format("{}={}", label, size);
}

bool matches(const Shape& shape, const ShapeSpec& spec) {
  if (shape.size() != spec.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (spec[i].size >= 0 && spec[i].size != shape[i]) return false;
  }
  return true;
}

std::string format_spec(const ShapeSpec& spec) {
  std::string out = "[";
  for (size_t i = 0; i < spec.size(); ++i) out += (i ? ", " : "") + spec[i].to_string();
  return out + "]";
}

}  // namespace mhc::st
