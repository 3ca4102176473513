// The pre-parse check of untrusted JSON: nlohmann's SAX parser (iterative) with a handler that
// counts depth and members and remembers the keys of each open object in a hash set.
#include "mhc/core/json_input.hpp"

#include <fmt/core.h>

#include <unordered_set>
#include <vector>

#include "mhc/core/error.hpp"

namespace mhc::json_input {

namespace {

using json = nlohmann::json;
using Kind = Problem::Kind;

class Checker : public nlohmann::json_sax<json> {
 public:
  explicit Checker(const Limits& limits) : limits_(limits) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }

  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (k.size() > limits_.max_key_bytes) {
      return fail(Kind::kKeyLength, fmt::format("a key of {} bytes ('{}'), over the limit of {}",
                                                k.size(), printable(k, 40), limits_.max_key_bytes));
    }
    auto& keys = open_.back().keys;
    if (!keys.insert(k).second) {
      return fail(Kind::kDuplicate, fmt::format("duplicate key '{}'", printable(k)));
    }
    return true;
  }

  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    // 406: a number out of range (1e400); everything else is a syntax error.
    const Kind kind = e.id == 406 ? Kind::kRange : Kind::kSyntax;
    std::string what = e.what();
    if (auto end = what.find("] "); what.rfind("[json.exception", 0) == 0 && end != what.npos) {
      what = what.substr(end + 2);  // drop "[json.exception.parse_error.101] "
    }
    problem_ = Problem{kind, printable(what, 200), byte};
    return false;
  }

  std::optional<Problem> problem() const { return problem_; }

 private:
  struct Open {
    bool object;
    size_t members = 0;
    std::unordered_set<std::string> keys;  // objects only
  };

  bool fail(Kind kind, std::string what) {
    problem_ = Problem{kind, std::move(what), std::nullopt};
    return false;
  }

  // One more member (or element) in the innermost open container.
  bool value() {
    if (open_.empty()) return true;
    Open& o = open_.back();
    if (++o.members > limits_.max_members) {
      return fail(Kind::kMembers,
                  fmt::format("an {} with more than {} {}", o.object ? "object" : "array",
                              limits_.max_members, o.object ? "members" : "elements"));
    }
    return true;
  }

  bool open(bool object) {
    if (!value()) return false;
    if (int(open_.size()) >= limits_.max_depth) {
      return fail(Kind::kDepth, fmt::format("nesting deeper than {} levels of objects and arrays",
                                            limits_.max_depth));
    }
    open_.push_back(Open{object, 0, {}});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  const Limits& limits_;
  std::vector<Open> open_;
  std::optional<Problem> problem_;
};

// Renders `v` into `out`, giving up once `out` is longer than `budget`.
void render(const json& v, std::string& out, size_t budget) {
  if (out.size() > budget) return;
  if (v.is_object() || v.is_array()) {
    out += v.is_object() ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= budget; ++it) {
      if (!first) out += ", ";
      first = false;
      if (v.is_object())
        out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
      render(*it, out, budget);
    }
    out += v.is_object() ? '}' : ']';
    return;
  }
  // A long string is cut before it is rendered (the replacement handler copes with a cut UTF-8
  // sequence).
  const json shown = v.is_string() ? json(v.get_ref<const std::string&>().substr(0, budget)) : v;
  out += shown.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::optional<Problem> check(std::string_view text, const Limits& limits) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so whatever follows one would go
  // unread; JSON allows none outside an escape.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Problem{Kind::kSyntax, "a NUL byte, which JSON does not allow", nul + 1};
  }
  Checker checker(limits);
  const bool ok = json::sax_parse(text.begin(), text.end(), &checker);
  if (ok) return std::nullopt;
  auto p = checker.problem();
  return p ? p : Problem{Kind::kSyntax, "rejected", std::nullopt};
}

json parse(std::string_view text, std::string_view source, const Limits& limits) {
  if (auto p = check(text, limits)) {
    std::string at = p->byte ? fmt::format(" at byte {}", *p->byte) : "";
    switch (p->kind) {
      case Kind::kSyntax:
        throw Error(fmt::format("{}: not valid JSON{}: {}", source, at, p->what));
      case Kind::kRange:
        throw Error(fmt::format("{}: not acceptable JSON{}: {}", source, at, p->what));
      default:
        throw Error(fmt::format("{}: {}", source, p->what));
    }
  }
  return json::parse(text.begin(), text.end());  // cannot fail: check() used the same parser
}

std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n;) {
    const auto c = static_cast<unsigned char>(s[i]);
    // Length of a valid UTF-8 sequence starting here (0: not one).
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    if (i + len > s.size()) len = 0;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) len = 0;
    }
    if (len == 0 || c < 0x20 || c == 0x7f || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

std::string brief(const json& v) {
  std::string s;
  render(v, s, 40);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace mhc::json_input
