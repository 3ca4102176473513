// nlohmann::json keeps the last of a duplicated key silently; the files mhc reads treat a key
// given twice in one object as an error (a tensor mapped to two shards, two headers for one
// tensor). DuplicateKeyFinder is a parser callback that remembers the first such key, at any depth.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace mhc::io {

class DuplicateKeyFinder {
 public:
  // The callback refers to this object: keep it alive while parsing.
  nlohmann::json::parser_callback_t callback() {
    return [this](int, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
      using Event = nlohmann::json::parse_event_t;
      if (ev == Event::object_start) open_objects_.emplace_back();
      if (ev == Event::object_end && !open_objects_.empty()) open_objects_.pop_back();
      if (ev == Event::key && !open_objects_.empty() && duplicate_.empty() &&
          !open_objects_.back().insert(v.get<std::string>()).second) {
        duplicate_ = v.get<std::string>();
      }
      return true;
    };
  }
  // Empty when every key was unique within its object.
  const std::string& first_duplicate() const { return duplicate_; }

 private:
  std::vector<std::set<std::string>> open_objects_;  // keys seen in each object still open
  std::string duplicate_;
};

}  // namespace mhc::io
