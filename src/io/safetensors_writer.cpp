// Writer: tensors in insertion order, header padded with spaces so the data section is 8-aligned.
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "mhc/core/error.hpp"
#include "mhc/io/safe_file.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st {

namespace {

using json = nlohmann::json;

uint64_t checked_numel(const std::string& name, const Shape& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw Error(fmt::format("safetensors writer: tensor '{}' has a negative dim in shape {}",
                              name, format_shape(shape)));
    }
    if (__builtin_mul_overflow(count, uint64_t(d), &count)) {
      throw Error(fmt::format("safetensors writer: tensor '{}': shape {} is too large", name,
                              format_shape(shape)));
    }
  }
  return count;
}

std::array<std::byte, 8> u64_le(uint64_t v) {
  std::array<std::byte, 8> out;
  for (int i = 0; i < 8; ++i) out[i] = std::byte((v >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

void Writer::add(std::string name, Dtype dtype, Shape shape, std::span<const std::byte> bytes) {
  if (name.empty() || name == "__metadata__") {
    throw Error(fmt::format("safetensors writer: '{}' is not a valid tensor name", name));
  }
  if (names_.count(name)) {
    throw Error(fmt::format("safetensors writer: tensor '{}' added twice", name));
  }
  const uint64_t count = checked_numel(name, shape);
  const size_t size = dtype_size(dtype);
  if (count > std::numeric_limits<uint64_t>::max() / size || count * size != bytes.size()) {
    throw Error(fmt::format(
        "safetensors writer: tensor '{}': shape {} of {} needs {} elements of {} bytes, got {} "
        "bytes",
        name, format_shape(shape), to_string(dtype), count, size, bytes.size()));
  }
  names_.insert(name);
  entries_.push_back({std::move(name), dtype, std::move(shape), {bytes.begin(), bytes.end()}});
}

void Writer::add_f32(std::string name, Shape shape, std::span<const float> values) {
  add(std::move(name), Dtype::F32, std::move(shape), std::as_bytes(values));
}

void Writer::add_bf16(std::string name, Shape shape, std::span<const Bf16> values) {
  add(std::move(name), Dtype::BF16, std::move(shape), std::as_bytes(values));
}

bool Writer::remove(std::string_view name) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.name == name; });
  if (it == entries_.end()) return false;
  names_.erase(it->name);
  entries_.erase(it);
  return true;
}

void Writer::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

void Writer::erase_metadata(std::string_view key) {
  auto it = metadata_.find(std::string(key));
  if (it != metadata_.end()) metadata_.erase(it);
}

// The header text is built directly (nlohmann's ordered_json finds a key by a linear search, which
// made a header of many tensors quadratic); a name that is not valid UTF-8 is refused.
std::string Writer::header_json() const {
  auto quoted = [](const std::string& s) {
    try {
      return json(s).dump();
    } catch (const json::type_error& e) {
      throw Error(fmt::format(
          "safetensors writer: a tensor name or metadata string is not valid UTF-8 ({})",
          e.what()));
    }
  };
  std::string text = "{";
  if (!metadata_.empty()) {
    text += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata_) {
      text += (text.back() == '{' ? "" : ",") + quoted(k) + ":" + quoted(v);
    }
    text += "}";
  }
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    text += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}",
                        text.size() > 1 ? "," : "", quoted(e.name), to_string(e.dtype),
                        json(e.shape).dump(), offset, offset + e.data.size());
    offset += e.data.size();
  }
  text += "}";
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

std::vector<std::byte> Writer::serialize() const {
  const std::string header = header_json();
  size_t total = 8 + header.size();
  for (const Entry& e : entries_) total += e.data.size();
  std::vector<std::byte> out(total);
  const auto len = u64_le(header.size());
  std::memcpy(out.data(), len.data(), 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  size_t at = 8 + header.size();
  for (const Entry& e : entries_) {
    if (!e.data.empty()) std::memcpy(out.data() + at, e.data.data(), e.data.size());
    at += e.data.size();
  }
  return out;
}

void Writer::write(const std::string& path, const std::vector<std::string>& inputs) const {
  const std::string header = header_json();
  io::OutputFile out(path, inputs);
  const auto len = u64_le(header.size());
  out.write(len.data(), len.size());
  out.write(header);
  for (const Entry& e : entries_) out.write(e.data.data(), e.data.size());
  out.commit();
}

}  // namespace mhc::st
