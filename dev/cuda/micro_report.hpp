// What the streaming micro-benchmarks (dev/cuda/boundary_stream_microbench.cu,
// dev/cuda/rowtile_boundary_microbench.cu) share on the host: their option lists and their JSON,
// one row per variant and token count, written through a temporary renamed into place.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/io/safe_file.hpp"

namespace mhc::bench {

struct MicroRow {
  std::string variant;
  int tokens, ctas;
  float us;
  double tb_per_s;
};

// "a,b,c" of positive integers up to 2^20; anything else ends the program with a message.
inline std::vector<int> parse_micro_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long value = std::strtol(p, &end, 10);
    if (end == p || value <= 0 || value > (1 << 20) || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "bad list: %s\n", text);
      std::exit(2);
    }
    out.push_back(int(value));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

// The options both take: --hidden C, --tokens a,b, --json F, --commit X, and where
// `check_only_allowed` --check-only. The caller's defaults stay where an option is absent; false
// (after a usage line) on anything else.
struct MicroOptions {
  int hidden = 5120;
  std::vector<int> tokens;
  const char* json_path = nullptr;
  std::string commit = "unknown";
  bool check_only = false;
};

inline bool parse_micro_options(int argc, char** argv, bool check_only_allowed,
                                MicroOptions& options) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (check_only_allowed && !std::strcmp(argv[i], "--check-only")) {
      options.check_only = true;
    } else if (!std::strcmp(argv[i], "--hidden") && has_value) {
      options.hidden = parse_micro_list(argv[++i]).at(0);
    } else if (!std::strcmp(argv[i], "--tokens") && has_value) {
      options.tokens = parse_micro_list(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json") && has_value) {
      options.json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--commit") && has_value) {
      options.commit = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--hidden C] [--tokens a,b] [--json F] [--commit X]%s\n",
                   argv[0], check_only_allowed ? " [--check-only]" : "");
      return false;
    }
  }
  return true;
}

// The document: the tool, the GPU, the commit and date, C, `extra` fields, the method, the rows.
inline void write_micro_json(const char* path, const std::string& tool, const cudaDeviceProp& prop,
                             int driver, const std::string& commit, int hidden,
                             const nlohmann::ordered_json& extra, const std::string& method,
                             const std::vector<MicroRow>& rows) {
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  nlohmann::ordered_json doc = {
      {"tool", tool},
      {"gpu", prop.name},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"driver_version", std::to_string(driver)},
      {"commit", commit},
      {"date", date},
      {"hidden", hidden}};
  for (const auto& [key, value] : extra.items()) doc[key] = value;
  doc["method"] = method;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const MicroRow& r : rows) {
    results.push_back({{"variant", r.variant},
                       {"tokens", r.tokens},
                       {"ctas", r.ctas},
                       {"median_us", std::round(r.us * 100.0) / 100.0},
                       {"tb_per_s", std::round(r.tb_per_s * 1000.0) / 1000.0}});
  }
  doc["results"] = results;
  mhc::io::write_file(path, doc.dump(1) + "\n");
}

}  // namespace mhc::bench
