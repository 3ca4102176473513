#include "mhc/core/tactics.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"

namespace mhc {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxThreshold = int64_t{1} << 20;  // the kernel config's own limit
constexpr int64_t kOpenEnded = std::numeric_limits<int64_t>::max();

class Reader {
 public:
  // `source` (a path from a kernel config, or "inline") is printed escaped: it is untrusted.
  Reader(const json& root, const std::string& source)
      : root_(root), source_(json_input::printable(source, 200)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("tactics {}: {}", source_, what));
  }
  const json& field(const json& obj, const char* key, const char* where) const {
    if (!obj.is_object() || !obj.contains(key)) fail(fmt::format("{} has no '{}'", where, key));
    return obj.at(key);
  }
  std::string text(const json& obj, const char* key, const char* where, bool required) const {
    if (!required && (!obj.contains(key) || obj.at(key).is_null())) return "";
    const json& v = field(obj, key, where);
    if (!v.is_string()) fail(fmt::format("'{}' must be a string, got {}", key, v.type_name()));
    return v.get<std::string>();
  }
  int64_t integer(const json& obj, const char* key, const char* where, int64_t lo,
                  int64_t hi) const {
    const json& v = field(obj, key, where);
    if (!v.is_number_integer()) {
      fail(fmt::format("'{}' must be an integer, got {} {}", key, v.type_name(),
                       json_input::brief(v)));
    }
    const int64_t value =
        v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi) ? hi + 1 : v.get<int64_t>();
    if (value < lo || value > hi) {
      fail(fmt::format("'{}' = {} is out of range {}..{}", key, json_input::brief(v), lo, hi));
    }
    return value;
  }
  const json& root() const { return root_; }

 private:
  const json& root_;
  const std::string source_;
};

constexpr int kMaxSplits = 1024;  // the kernel config's prenorm_splits limit

// "prenorm": [{"max_tokens": 256, "kernel": "mma16", "splits": 32}, ..., {"max_tokens": null,
// ...}]: ascending, the last open-ended, known kernels only (the plan checks the image has them).
std::vector<PrenormTactic> read_prenorm(const Reader& r) {
  std::vector<PrenormTactic> out;
  if (!r.root().contains("prenorm") || r.root().at("prenorm").is_null()) return out;
  const json& list = r.root().at("prenorm");
  if (!list.is_array() || list.empty()) r.fail("'prenorm' must be a non-empty array of ranges");
  for (const json& item : list) {
    if (!out.empty() && out.back().max_tokens == kOpenEnded) {
      r.fail("'prenorm': only the last range may have max_tokens null");
    }
    PrenormTactic t;
    const json& max = r.field(item, "max_tokens", "a prenorm range");
    t.max_tokens = max.is_null()
                       ? kOpenEnded
                       : r.integer(item, "max_tokens", "a prenorm range", 1, kOpenEnded - 1);
    if (!out.empty() && t.max_tokens <= out.back().max_tokens) {
      r.fail(fmt::format("'prenorm': max_tokens {} does not ascend", t.max_tokens));
    }
    t.kernel = r.text(item, "kernel", "a prenorm range", true);
    if (t.kernel != "mma16" && t.kernel != "mma64" && t.kernel != "tma128") {
      r.fail(fmt::format("'prenorm': unknown kernel '{}' (known: mma16, mma64, tma128)",
                         json_input::printable(t.kernel, 40)));
    }
    t.splits = static_cast<int>(r.integer(item, "splits", "a prenorm range", 1, kMaxSplits));
    out.push_back(t);
  }
  if (out.back().max_tokens != kOpenEnded)
    r.fail("'prenorm': the last range needs max_tokens null");
  return out;
}

// Bounded before parsing, as every untrusted JSON (mhc/core/json_input.hpp): a tactics file is
// a few rounds of rows, nested 5 deep.
json parse_json(std::string_view text, const std::string& source) {
  return json_input::parse(text, "tactics " + json_input::printable(source, 200),
                           json_input::Limits{});
}

constexpr std::streamoff kMaxFileBytes = std::streamoff{16} << 20;

}  // namespace

Tactics Tactics::parse(std::string_view json_text, const std::string& source) {
  const json root = parse_json(json_text, source);
  const Reader r(root, source);
  if (!root.is_object()) r.fail(fmt::format("must be a JSON object, got {}", root.type_name()));
  const std::string format = r.text(root, "format", "the file", true);
  if (format != kTacticsFormat) {
    r.fail(fmt::format("format '{}' is not '{}' (written by `mhc tune`)",
                       json_input::printable(format, 40), kTacticsFormat));
  }
  Tactics t;
  t.source = source;
  t.gpu = r.text(root, "gpu", "the file", true);
  try {
    t.capability = parse_capability(r.text(root, "arch", "the file", true));
  } catch (const Error& e) {
    r.fail(e.what());
  }
  t.sm_count = static_cast<int>(r.integer(root, "sm_count", "the file", 1, 100000));
  t.commit = r.text(root, "commit", "the file", false);
  t.date = r.text(root, "date", "the file", false);
  t.method = r.text(root, "method", "the file", false);
  const json& shape = r.field(root, "shape", "the file");
  t.hidden = static_cast<int>(r.integer(shape, "hidden", "shape", 1, 1 << 20));
  t.n = static_cast<int>(r.integer(shape, "n", "shape", 1, 64));
  t.layers = static_cast<int>(r.integer(shape, "layers", "shape", 1, 100000));
  t.overlap_max_tokens =
      static_cast<int>(r.integer(root, "overlap_max_tokens", "the file", 0, kMaxThreshold));
  t.prenorm = read_prenorm(r);
  if (root.contains("fused_boundary_min_tokens") &&
      !root.at("fused_boundary_min_tokens").is_null()) {
    t.fused_boundary_min_tokens =
        r.integer(root, "fused_boundary_min_tokens", "the file", 0, kMaxThreshold);
  }
  return t;
}

Tactics Tactics::load(const std::string& file) {
  // A regular file only: a FIFO or a device named in a kernel config would block or never end.
  const std::string path = json_input::printable(file, 200);  // for the messages
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    throw Error(fmt::format("tactics {}: not a regular file{}", path,
                            ec ? " (" + ec.message() + ")" : std::string()));
  }
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw Error(fmt::format("tactics {}: cannot open the file", path));
  if (in.tellg() > kMaxFileBytes) {
    throw Error(
        fmt::format("tactics {}: larger than {} bytes; not a tactics file", path, kMaxFileBytes));
  }
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("tactics {}: read error", path));
  Tactics t = parse(text.str(), file);
  t.from_file = true;
  return t;
}

std::string Tactics::to_json() const {
  json j = {{"arch", fmt::format("{}.{}", capability.major, capability.minor)},
            {"commit", commit},
            {"date", date},
            {"format", kTacticsFormat},
            {"gpu", gpu},
            {"method", method},
            {"overlap_max_tokens", overlap_max_tokens},
            {"shape", {{"hidden", hidden}, {"layers", layers}, {"n", n}}},
            {"sm_count", sm_count}};
  if (!prenorm.empty()) {
    json ranges = json::array();
    for (const PrenormTactic& t : prenorm) {
      ranges.push_back(
          {{"kernel", t.kernel},
           {"max_tokens", t.max_tokens == kOpenEnded ? json(nullptr) : json(t.max_tokens)},
           {"splits", t.splits}});
    }
    j["prenorm"] = ranges;
  }
  if (fused_boundary_min_tokens) j["fused_boundary_min_tokens"] = *fused_boundary_min_tokens;
  return j.dump();
}

bool overlap_won(const OverlapGains& size) {
  if (size.gain_percent.empty()) {
    throw Error(fmt::format("overlap gains at M={}: no rounds", size.tokens));
  }
  for (double g : size.gain_percent) {
    if (!std::isfinite(g)) {
      throw Error(fmt::format("overlap gain at M={} is not finite ({})", size.tokens, g));
    }
  }
  return *std::min_element(size.gain_percent.begin(), size.gain_percent.end()) > 0;
}

int64_t overlap_threshold(const std::vector<OverlapGains>& sizes) {
  if (sizes.empty()) throw Error("no overlap gains to choose from");
  int64_t up_to = 0;
  bool lost = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0 && sizes[i].tokens <= sizes[i - 1].tokens) {
      throw Error(fmt::format("overlap gains: M={} after M={} (sizes must ascend)", sizes[i].tokens,
                              sizes[i - 1].tokens));
    }
    const bool won = overlap_won(sizes[i]);  // every size checked, also past the first loss
    if (!won) lost = true;
    if (!lost) up_to = sizes[i].tokens;
  }
  return up_to;
}

std::vector<PrenormTactic> fastest_prenorm(const std::vector<PrenormTiming>& timings) {
  std::map<int64_t, const PrenormTiming*> best;  // by size, ascending
  for (const PrenormTiming& t : timings) {
    if (!(t.median_us > 0)) {
      throw Error(fmt::format("prenorm timing of {} at M={} is not positive", t.kernel, t.tokens));
    }
    const PrenormTiming*& b = best[t.tokens];
    if (!b || t.median_us < b->median_us) b = &t;
  }
  if (best.empty()) throw Error("no prenorm timings to choose from");
  std::vector<PrenormTactic> out;
  for (const auto& [tokens, t] : best) {
    if (!out.empty() && out.back().kernel == t->kernel && out.back().splits == t->splits) {
      out.back().max_tokens = tokens;
    } else {
      out.push_back({tokens, t->kernel, t->splits});
    }
  }
  out.back().max_tokens = kOpenEnded;
  return out;
}

int64_t fused_boundary_threshold(const std::vector<BoundaryTiming>& timings) {
  std::map<int64_t, bool> won;  // by size, ascending
  for (const BoundaryTiming& t : timings) {
    if (!(t.fused_us > 0) || !(t.unfused_us > 0)) {
      throw Error(fmt::format("boundary timing at M={} is not positive", t.tokens));
    }
    if (won.count(t.tokens) != 0)
      throw Error(fmt::format("two boundary timings at M={}", t.tokens));
    won[t.tokens] = t.fused_us < t.unfused_us;
  }
  if (won.empty()) throw Error("no boundary timings to choose from");
  int64_t from = 0;  // the first size of the last run of wins that reaches the largest size
  for (const auto& [tokens, fused_won] : won) {
    if (!fused_won) {
      from = 0;
    } else if (from == 0) {
      from = tokens;
    }
  }
  return from;
}

std::string Tactics::describe() const {
  const std::string boundary =
      !fused_boundary_min_tokens ? ""
      : *fused_boundary_min_tokens > 0
          ? fmt::format(", fused boundary from {} tokens", *fused_boundary_min_tokens)
          : ", fused boundary never";
  // The strings came from a file: printed escaped.
  const auto shown = [](const std::string& s, std::string_view empty) {
    return s.empty() ? std::string(empty) : json_input::printable(s, 80);
  };
  return fmt::format(
      "tactics {}: overlap up to {} tokens{} ({}, {}.{}, C={} n={} L={}, commit {}, {})",
      shown(source, ""), overlap_max_tokens, boundary, shown(gpu, ""), capability.major,
      capability.minor, hidden, n, layers, shown(commit, "unknown"), shown(date, "undated"));
}

}  // namespace mhc
