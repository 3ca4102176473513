// `--json [FILE]` on the built binary, the same in every command: bare, stdout is exactly one JSON
// object; with FILE the JSON goes there (written safely) and the text report to stdout. `mhc site`
// has its own in site_cli_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace mhc::cli::testing {
namespace {

namespace fs = std::filesystem;

struct Command {
  std::string args;  // a command that succeeds on the CPU
  std::string key;   // a key its JSON report has
  std::string text;  // a fragment of its text report
};

// `tag` keeps each test's export directory its own (export-example wants a new directory).
std::vector<Command> commands(const std::string& tag) {
  const std::string export_dir = scratch("json_export_" + tag);
  fs::remove_all(export_dir);
  return {
      {"run --backend cpu --layers 1 --tokens 2 --hidden 64", "site_check", "result: PASS"},
      {"dispatch --arch 9.0 --tokens 8", "reason_code", "decision"},
      {"export-example " + quote(export_dir) + " --layers 1 --hidden 64", "files",
       "mHC/norm tensors"},
  };
}

// Temporaries the writer left next to its target (hidden names with ".mhc-" in them).
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".mhc-") != std::string::npos) names.push_back(name);
  }
  return names;
}

TEST(JsonCli, BareJsonPrintsOneObjectOnStdout) {
  for (const Command& c : commands("stdout")) {
    const RunResult r = run_mhc(c.args + " --json");
    ASSERT_EQ(r.status, 0) << c.args << "\n" << r.err;
    const auto doc = nlohmann::json::parse(r.out);  // throws on anything but one JSON value
    EXPECT_TRUE(doc.is_object() && doc.contains(c.key)) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find(c.text), std::string::npos) << c.args << ": text report on stdout";
  }
}

TEST(JsonCli, JsonFileGetsTheReportAndStdoutTheText) {
  const fs::path dir = fs::path(scratch("json_files"));
  fs::create_directories(dir);
  for (const Command& c : commands("file")) {
    const std::string path = (dir / "report.json").string();
    fs::remove(path);
    const RunResult r = run_mhc(c.args + " --json " + quote(path));
    ASSERT_EQ(r.status, 0) << c.args << "\n" << r.err;
    EXPECT_NE(r.out.find(c.text), std::string::npos) << c.args << "\n" << r.out;
    const auto doc = nlohmann::json::parse(slurp(path));
    EXPECT_TRUE(doc.contains(c.key)) << c.args;
    EXPECT_TRUE(leftovers(dir).empty()) << c.args;
  }
}

TEST(JsonCli, JsonFileReplacesASymlinkNotItsTarget) {
  const fs::path dir = fs::path(scratch("json_symlink"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "precious.txt", link = dir / "report.json";
  { std::ofstream(target) << "keep"; }
  fs::create_symlink(target, link);
  const RunResult r = run_mhc("dispatch --arch 9.0 --json " + quote(link.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(target.string()), "keep");
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_TRUE(nlohmann::json::parse(slurp(link.string())).contains("reason_code"));
}

TEST(JsonCli, AnUnwritableJsonFileIsAnErrorNamingIt) {
  const std::string dir = scratch("json_is_a_dir");
  fs::create_directories(dir);
  for (const std::string& path : {dir, std::string("/nonexistent-mhc-test/report.json")}) {
    const RunResult r = run_mhc("dispatch --arch 9.0 --json " + quote(path));
    EXPECT_EQ(r.status, 2) << path;
    EXPECT_EQ(r.err.rfind("mhc: error: " + path, 0), 0u) << r.err;
  }
  EXPECT_TRUE(leftovers(dir).empty());
}

}  // namespace
}  // namespace mhc::cli::testing
