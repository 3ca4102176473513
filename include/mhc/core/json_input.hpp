// Untrusted JSON (safetensors headers, checkpoint indexes, config.json, --kernel-config): a linear,
// non-recursive check run BEFORE the text becomes an nlohmann::json value, because such a value is
// copied, compared and dumped recursively (a document nested 80k deep overflows the stack), and
// nlohmann's callback parser, the usual way to see duplicate keys, is quadratic in the size of an
// object (it rescans the parent after every nested object). See docs/limits.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace mhc::json_input {

struct Limits {
  int max_depth = 16;              // nested objects and arrays; the root counts as 1
  size_t max_members = 4'000'000;  // members of one object or elements of one array
  size_t max_key_bytes = 4096;     // length of one object key
};

struct Problem {
  enum class Kind { kSyntax, kRange, kDepth, kDuplicate, kKeyLength, kMembers };
  Kind kind = Kind::kSyntax;
  std::string what;  // e.g. "duplicate key 'a'", printable and bounded in length
  // Where a syntax or range error was found, as nlohmann reports it: the count of bytes read, so
  // byte - 1 is the 0-based offset of the offending byte. Unset for the limits.
  std::optional<size_t> byte;
};

// The first problem in `text`: not JSON (a NUL byte anywhere included), a number out of range,
// nesting deeper than the limit, a key given twice in one object, a key or object over the limits.
// Linear time, bounded stack.
std::optional<Problem> check(std::string_view text, const Limits& limits);

// check(), then the parse; throws mhc::Error "{source}: not valid JSON ...", "{source}: duplicate
// key ..." and so on.
nlohmann::json parse(std::string_view text, std::string_view source, const Limits& limits);

// `s` made safe to print: control bytes, backslashes and invalid UTF-8 as \xNN escapes, cut to at
// most `max_bytes` bytes of input with "..." (a NUL no longer cuts a message short).
std::string printable(std::string_view s, size_t max_bytes = 80);

// A short rendering of a parsed value for error messages (at most ~40 bytes, never recursive past
// what check() allowed).
std::string brief(const nlohmann::json& v);

}  // namespace mhc::json_input
