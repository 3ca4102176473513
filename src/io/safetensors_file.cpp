// File: a memory-mapped (or in-memory) safetensors file whose header has been validated, plus the
// typed reads that check dtype and shape.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/safe_file.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

struct File::Storage {
  virtual ~Storage() = default;
  std::span<const std::byte> data;
};

namespace {

struct Mapping : File::Storage {
  void* addr = nullptr;
  size_t length = 0;
  ~Mapping() override {
    if (addr) munmap(addr, length);
  }
};

struct Owned : File::Storage {
  std::vector<std::byte> buffer;
};

// Closes a descriptor on every path out of File::open.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::unique_ptr<File::Storage> map_file(const std::string& path) {
  uint64_t size = 0;
  Fd fd{io::open_regular_file(path, size)};  // a FIFO or a directory is refused, never waited on
  auto m = std::make_unique<Mapping>();
  if (size == 0) return m;  // mmap refuses length 0; the header check reports the size
  m->length = static_cast<size_t>(size);
  void* addr = ::mmap(nullptr, m->length, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (addr == MAP_FAILED) {
    throw Error(fmt::format("{}: cannot map {} bytes: {}", path, m->length, std::strerror(errno)));
  }
  m->addr = addr;
  m->data = {static_cast<const std::byte*>(addr), m->length};
  return m;
}

}  // namespace

File::File(std::unique_ptr<Storage> storage, std::string source)
    : storage_(std::move(storage)), source_(std::move(source)) {
  header_ = parse_header(storage_->data, source_);
}

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::string& path) { return File(map_file(path), path); }

File File::from_bytes(std::vector<std::byte> bytes, std::string source) {
  auto owned = std::make_unique<Owned>();
  owned->buffer = std::move(bytes);
  owned->data = owned->buffer;
  return File(std::move(owned), std::move(source));
}

const TensorInfo* File::find(std::string_view name) const {
  auto it = std::lower_bound(header_.tensors.begin(), header_.tensors.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != header_.tensors.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& File::get(std::string_view name) const {
  if (const TensorInfo* t = find(name)) return *t;
  std::string present;
  for (size_t i = 0; i < header_.tensors.size() && i < 12; ++i) {
    present += (i ? ", " : "") + json_input::printable(header_.tensors[i].name);
  }
  if (header_.tensors.size() > 12) present += ", ...";
  throw Error(fmt::format("{}: no tensor named '{}' (the file has: {})", source_,
                          json_input::printable(name), present.empty() ? "no tensors" : present));
}

std::span<const std::byte> File::bytes(const TensorInfo& t) const {
  const uint64_t size = storage_->data.size();
  if (t.begin > t.end || t.end > header_.data_size || header_.data_start + t.end > size) {
    throw Error(fmt::format("{}: tensor '{}' is not a tensor of this file", source_, t.name));
  }
  return storage_->data.subspan(header_.data_start + t.begin, t.nbytes());
}

std::vector<std::string> File::names() const {
  std::vector<std::string> out;
  for (const auto& t : header_.tensors) out.push_back(t.name);
  return out;
}

const TensorInfo& File::expect(std::string_view name, Dtype dtype, const ShapeSpec& spec) const {
  const TensorInfo& t = get(name);
  if (t.dtype != dtype) {
    throw Error(fmt::format("{}: tensor '{}' has dtype {}, expected {}", source_, name,
                            to_string(t.dtype), to_string(dtype)));
  }
  if (!matches(t.shape, spec)) {
    throw Error(fmt::format("{}: tensor '{}' has shape {}, expected {}", source_, name,
                            format_shape(t.shape), format_spec(spec)));
  }
  return t;
}

namespace {

template <class T>
std::vector<T> copy_out(std::span<const std::byte> bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());  // may be unaligned
  return out;
}

}  // namespace

std::vector<float> File::read_f32(std::string_view name, const ShapeSpec& spec) const {
  return copy_out<float>(bytes(expect(name, Dtype::F32, spec)));
}

std::vector<Bf16> File::read_bf16(std::string_view name, const ShapeSpec& spec) const {
  return copy_out<Bf16>(bytes(expect(name, Dtype::BF16, spec)));
}

std::vector<float> File::read_f32_or_bf16(std::string_view name, const ShapeSpec& spec) const {
  const TensorInfo& t = get(name);
  if (t.dtype == Dtype::F32) return read_f32(name, spec);
  if (t.dtype != Dtype::BF16) {
    throw Error(fmt::format("{}: tensor '{}' has dtype {}, expected F32 or BF16", source_, name,
                            to_string(t.dtype)));
  }
  std::vector<Bf16> raw = read_bf16(name, spec);
  std::vector<float> out(raw.size());
  std::transform(raw.begin(), raw.end(), out.begin(), bf16_to_float);
  return out;
}

}  // namespace mhc::st
