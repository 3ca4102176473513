// Parsing and validation of a safetensors header. Everything about the file is checked here, once,
// so that File can hand out spans without further bounds checks.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/io/limits.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::st {

namespace {

using json = nlohmann::json;

using io::kMaxHeaderBytes;
using json_input::brief;
using json_input::printable;

[[noreturn]] void fail(std::string_view source, const std::string& what) {
  throw Error(fmt::format("{}: {}", source, what));
}

uint64_t load_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}

// Parses the header text after the checks of json_input (depth, duplicate keys, sizes), so that
// nothing below recurses over untrusted nesting.
json parse_json(const char* text, uint64_t size, std::string_view source) {
  const std::string_view view(text, size);
  if (auto p = json_input::check(view, io::kHeaderJson)) {
    using Kind = json_input::Problem::Kind;
    if (p->kind == Kind::kSyntax) {
      const uint64_t header_byte = p->byte.value_or(1) > 0 ? p->byte.value_or(1) - 1 : 0;
      fail(source, fmt::format("header is not valid JSON at file offset {} (header byte {}): {}",
                               8 + header_byte, header_byte, p->what));
    }
    if (p->kind == Kind::kRange)
      fail(source, fmt::format("header is not acceptable JSON: {}", p->what));
    if (p->kind == Kind::kMembers) {
      fail(source,
           fmt::format("header has {} (the limit is {} tensors)", p->what, io::kMaxTensors));
    }
    fail(source, fmt::format("header has {}", p->what));
  }
  return json::parse(view.begin(), view.end());
}

// "an integer", "a string", ... for messages such as "shape is a string, not an array".
std::string type_name(const json& v) {
  if (v.is_number_float()) return "a non-integer number";
  if (v.is_number_integer()) return "an integer";
  if (v.is_null()) return "null";
  std::string t = v.type_name();
  return (t == "object" || t == "array" ? "an " : "a ") + t;
}

// What is wrong with a value that should be a non-negative integer of at most `max`, or "" when
// nothing is: negative, too large and not an integer are three different mistakes.
std::string count_problem(const json& v, uint64_t max, std::string_view max_name) {
  if (v.is_number_unsigned()) {
    return v.get<uint64_t>() <= max ? "" : fmt::format("larger than {}", max_name);
  }
  if (v.is_number_integer()) return "negative";
  return type_name(v);
}

class EntryParser {
 public:
  EntryParser(std::string_view source, const std::string& name, const Header& h)
      : source_(source), name_(name), header_(h) {}

  TensorInfo parse(const json& entry) {
    if (!entry.is_object()) fail_entry(fmt::format("entry is {}, not an object", type_name(entry)));
    for (const auto& [key, _] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets") {
        fail_entry(fmt::format("unknown field '{}' (expected dtype, shape, data_offsets)",
                               printable(key)));
      }
    }
    TensorInfo t;
    t.name = name_;
    t.dtype = parse_dtype_field(field(entry, "dtype"));
    t.shape = parse_shape(field(entry, "shape"));
    parse_offsets(field(entry, "data_offsets"), t);
    check_size(t);
    return t;
  }

 private:
  [[noreturn]] void fail_entry(const std::string& what) const {
    fail(source_, fmt::format("tensor '{}': {}", printable(name_), what));
  }

  const json& field(const json& entry, const char* key) const {
    auto it = entry.find(key);
    if (it == entry.end()) fail_entry(fmt::format("missing field '{}'", key));
    return *it;
  }

  Dtype parse_dtype_field(const json& v) const {
    if (!v.is_string()) fail_entry(fmt::format("dtype is {}, not a string", type_name(v)));
    auto d = parse_dtype(v.get<std::string>());
    if (!d) {
      std::string known;
      for (Dtype k : all_dtypes()) known += (known.empty() ? "" : ", ") + std::string(to_string(k));
      fail_entry(fmt::format("unknown dtype {} (known: {})", brief(v), known));
    }
    return *d;
  }

  Shape parse_shape(const json& v) const {
    if (!v.is_array()) fail_entry(fmt::format("shape is {}, not an array", type_name(v)));
    Shape shape;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string problem =
          count_problem(v[i], uint64_t(std::numeric_limits<int64_t>::max()), "2^63-1");
      if (!problem.empty()) {
        fail_entry(fmt::format("shape dim {} is {} ({}), expected a non-negative integer", i,
                               brief(v[i]), problem));
      }
      shape.push_back(v[i].get<int64_t>());
    }
    return shape;
  }

  void parse_offsets(const json& v, TensorInfo& t) const {
    if (!v.is_array() || v.size() != 2) {
      fail_entry(fmt::format("data_offsets is {}, expected [begin, end]", brief(v)));
    }
    for (int i = 0; i < 2; ++i) {
      const std::string problem =
          count_problem(v[i], std::numeric_limits<uint64_t>::max(), "2^64-1");
      if (!problem.empty()) {
        fail_entry(fmt::format("data_offsets[{}] is {} ({}), expected a non-negative integer", i,
                               brief(v[i]), problem));
      }
    }
    t.begin = v[0].get<uint64_t>();
    t.end = v[1].get<uint64_t>();
    if (t.begin > t.end) {
      fail_entry(fmt::format("data_offsets [{}, {}]: begin is after end", t.begin, t.end));
    }
    if (t.end > header_.data_size) {
      // data_start + end may not fit in 64 bits (an offset near 2^64): say so rather than wrap.
      uint64_t at = 0;
      const std::string where = __builtin_add_overflow(header_.data_start, t.end, &at)
                                    ? fmt::format("{} + {}, past 2^64", header_.data_start, t.end)
                                    : fmt::format("{}", at);
      fail_entry(fmt::format(
          "data_offsets [{}, {}] end at file offset {}, beyond the end of the file ({} bytes; the "
          "data section is {} bytes from offset {})",
          t.begin, t.end, where, header_.data_start + header_.data_size, header_.data_size,
          header_.data_start));
    }
  }

  void check_size(const TensorInfo& t) const {
    const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
    uint64_t count = empty ? 0 : 1;
    for (int64_t d : t.shape) {
      if (!empty && __builtin_mul_overflow(count, uint64_t(d), &count)) {
        fail_entry(
            fmt::format("shape {} has more elements than fit in 64 bits", format_shape(t.shape)));
      }
    }
    uint64_t bytes = 0;
    if (count > uint64_t(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(count, dtype_size(t.dtype), &bytes)) {
      fail_entry(
          fmt::format("shape {} of {} is too large", format_shape(t.shape), to_string(t.dtype)));
    }
    if (bytes != t.end - t.begin) {
      fail_entry(fmt::format(
          "data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {} x {} = {} bytes",
          t.begin, t.end, t.end - t.begin, format_shape(t.shape), to_string(t.dtype), count,
          dtype_size(t.dtype), bytes));
    }
  }

  std::string_view source_;
  const std::string& name_;
  const Header& header_;
};

void parse_metadata(const json& v, std::string_view source, Header& h) {
  if (!v.is_object()) {
    fail(source, fmt::format("__metadata__ is {}, not an object of strings", type_name(v)));
  }
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      fail(source, fmt::format("__metadata__ value of '{}' is {} ({}), not a string",
                               printable(key), type_name(value), brief(value)));
    }
    h.metadata[key] = value.get<std::string>();
  }
}

// Tensors may leave gaps and may come in any order, but no two non-empty ones may share a byte.
void check_overlaps(const std::vector<TensorInfo>& tensors, std::string_view source) {
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors) {
    if (t.nbytes() > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  const TensorInfo* reach = nullptr;  // the tensor ending furthest so far
  for (const TensorInfo* t : order) {
    if (reach && t->begin < reach->end) {
      fail(source, fmt::format("tensors '{}' (data bytes [{}, {})) and '{}' ([{}, {})) overlap",
                               printable(reach->name), reach->begin, reach->end, printable(t->name),
                               t->begin, t->end));
    }
    if (!reach || t->end > reach->end) reach = t;
  }
}

}  // namespace

Header parse_header(std::span<const std::byte> file, std::string_view source) {
  if (file.size() < 8) {
    fail(source,
         fmt::format("file is {} bytes, shorter than the 8-byte header length", file.size()));
  }
  const uint64_t n = load_u64_le(file.data());
  if (n > file.size() - 8) {
    fail(source, fmt::format("header length {} (file bytes 0-7) is larger than the {} bytes that "
                             "follow it",
                             n, file.size() - 8));
  }
  if (n > kMaxHeaderBytes) {
    fail(source, fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxHeaderBytes));
  }
  Header h;
  h.data_start = 8 + n;
  h.data_size = file.size() - h.data_start;
  const json j = parse_json(reinterpret_cast<const char*>(file.data() + 8), n, source);
  if (!j.is_object()) {
    fail(source, fmt::format("header (file offsets 8 to {}) is {}, not a JSON object", 8 + n,
                             type_name(j)));
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      parse_metadata(value, source, h);
    } else if (key.empty()) {
      fail(source, "header has a tensor with an empty name");
    } else {
      h.tensors.push_back(EntryParser(source, key, h).parse(value));
    }
  }
  check_overlaps(h.tensors, source);
  return h;
}

}  // namespace mhc::st
