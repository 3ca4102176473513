// Safetensors files: a strict, memory-mapped reader, a writer, and the `mhc site` file layouts.
//
// Format: u64 little-endian header length N, N bytes of JSON (an object: tensor name ->
// {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the data section,
// plus an optional "__metadata__" object of strings), then the data section. The reader checks
// everything when the file is opened; any problem is an mhc::Error naming the file and the tensor
// or byte offset. Nothing is read outside the file. See docs/safetensors.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc::st {

enum class Dtype {
  BOOL,
  U8,
  I8,
  F8_E4M3,
  F8_E5M2,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  I64,
  U64,
  F64,
};
std::string_view to_string(Dtype d);                   // "F32", "BF16", ...
std::optional<Dtype> parse_dtype(std::string_view s);  // nullopt for unknown names
size_t dtype_size(Dtype d);                            // bytes per element
std::vector<Dtype> all_dtypes();

using Shape = std::vector<int64_t>;
std::string format_shape(const Shape& s);  // "[3, 4, 5]"

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the data section
  uint64_t end = 0;
  int64_t numel() const;  // 1 for a scalar (shape [])
  uint64_t nbytes() const { return end - begin; }
};

// One dimension of an expected shape: a fixed size, optionally labelled ("n=4"), or a free
// labelled size ("M"). Lets callers write {"M", 4, 5120} or {Dim("n", n), Dim("C", c)}.
struct Dim {
  int64_t size = -1;  // -1: any size
  std::string label;
  Dim(int64_t s) : size(s) {}  // NOLINT: implicit on purpose
  template <size_t N>
  Dim(const char (&free_label)[N]) : label(free_label) {}  // NOLINT
  Dim(std::string l, int64_t s) : size(s), label(std::move(l)) {}
  static Dim any(std::string l = "*") { return Dim(std::move(l), -1); }
  std::string to_string() const;  // "M", "5120", "n=4"
};
using ShapeSpec = std::vector<Dim>;
bool matches(const Shape& shape, const ShapeSpec& spec);
std::string format_spec(const ShapeSpec& spec);  // "[M, n=4, 5120]"

// The parsed header of a file (or of a buffer holding a whole file).
struct Header {
  std::vector<TensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data section (8 + N)
  uint64_t data_size = 0;
};
// Parses and validates a whole file image; `source` names it in errors. Never reads outside
// `file`. Throws mhc::Error. This is the entry point a fuzzer calls.
Header parse_header(std::span<const std::byte> file, std::string_view source);

class File {
 public:
  static File open(const std::string& path);  // mmap, read-only
  static File from_bytes(std::vector<std::byte> bytes, std::string source = "<memory>");
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const { return source_; }
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& get(std::string_view name) const;  // throws naming the missing tensor
  std::span<const std::byte> bytes(const TensorInfo& t) const;
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  std::vector<std::string> names() const;  // sorted
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const Header& header() const { return header_; }

  // Checks dtype and shape; throws e.g. "tensor 'x' has shape [3, 4, 5], expected [M, 4, 5120]".
  const TensorInfo& expect(std::string_view name, Dtype dtype, const ShapeSpec& spec) const;
  std::vector<float> read_f32(std::string_view name, const ShapeSpec& spec) const;
  std::vector<Bf16> read_bf16(std::string_view name, const ShapeSpec& spec) const;
  // F32 or BF16 (e.g. a norm weight), widened to float.
  std::vector<float> read_f32_or_bf16(std::string_view name, const ShapeSpec& spec) const;

  struct Storage;  // implementation detail: the mapping or the buffer

 private:
  File(std::unique_ptr<Storage> storage, std::string source);
  std::unique_ptr<Storage> storage_;
  std::string source_;
  Header header_;
};

class Writer {
 public:
  // Throws on a duplicate or empty name, a negative dim, or bytes.size() != numel * dtype size.
  void add(std::string name, Dtype dtype, Shape shape, std::span<const std::byte> bytes);
  void add_f32(std::string name, Shape shape, std::span<const float> values);
  void add_bf16(std::string name, Shape shape, std::span<const Bf16> values);
  bool remove(std::string_view name);  // true when it was there
  void set_metadata(std::string key, std::string value);
  void erase_metadata(std::string_view key);

  std::vector<std::byte> serialize() const;
  // Writes through io::OutputFile (include/mhc/io/safe_file.hpp): a fresh temporary renamed onto
  // `path`, refusing a directory, an empty path and any of `inputs` as the target.
  void write(const std::string& path, const std::vector<std::string>& inputs = {}) const;

 private:
  struct Entry {
    std::string name;
    Dtype dtype;
    Shape shape;
    std::vector<std::byte> data;
  };
  std::string header_json() const;         // padded so that the data section starts 8-byte aligned
  std::vector<Entry> entries_;             // insertion order
  std::unordered_set<std::string> names_;  // of entries_, for a constant-time duplicate check
  std::map<std::string, std::string> metadata_;
};

// ---- `mhc site` files (tensor names and layouts of mhc/core/site_views.hpp)
// ----------------------------

// Metadata keys of a site-input file that set parameters; others (except "format") are errors.
inline constexpr std::string_view kSiteParamKeys[] = {"eps_h", "eps_n", "sinkhorn_iters",
                                                      "post_mult"};

struct SiteFileInputs {
  MhcParams params;  // n and C from x; eps_h, eps_n, T, post_mult from metadata or V4.1 defaults
  int64_t tokens = 0;
  std::vector<Bf16> x, sublayer_out;
  std::vector<float> pre_mix;
  SiteWeights weights;  // norm_weight widened to float when stored as bf16
  SiteInputsView inputs() const { return {tokens, x.data(), pre_mix.data(), sublayer_out.data()}; }
};

// Reads and checks a site-input file: every tensor present with its dtype and a shape consistent
// with x's [M, n, C], finite values, no unknown tensors, strictly parsed metadata, then
// mhc::validate(params).
// Metadata values are range-checked on their own (sinkhorn_iters in [1, io::kMaxSinkhornIters],
// eps >= 0, all finite), so a bad value is blamed on its key.
SiteFileInputs read_site_inputs(const std::string& path);
SiteFileInputs read_site_inputs(const File& f);  // the same on an opened file (the fuzzer's)

// A writer holding a site-input file (params as metadata); callers may edit it before write().
Writer site_inputs_writer(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
                          bool norm_weight_bf16 = false);

// layer_input, pre, post, comb, x_next, plus the given metadata.
Writer site_outputs_writer(const MhcParams& p, int64_t tokens, const SiteOutputs& out,
                           const std::map<std::string, std::string>& metadata);
SiteOutputs read_site_outputs(const File& f, const MhcParams& p, int64_t tokens);

// Throws mhc::Error when an output holds a NaN or an infinity (finite inputs were checked on
// reading, so this is the computation's fault, e.g. an overflow): names the output, the value and
// its position, e.g. "output 'comb' holds nan at token 3, row 1, column 2 (flat element 57)".
void check_site_outputs_finite(const MhcParams& p, const SiteOutputs& out);

}  // namespace mhc::st
