// `mhc site --out` and `--json FILE`: the data-loss cases of issue 15 end to end (the old writer
// used OUT.tmp with fopen("wb")); non-finite outputs from finite inputs refused with the output and
// position; the JSON report an output like --out, checked before the work against every file the
// command reads or writes and never replacing one, UTF-8 whatever the paths, a replaced file's
// permission bits kept, and `tune --out` checked before the sweep.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "io/site_test_util.hpp"
#include "mhc/io/safetensors.hpp"

namespace mhc::cli {
namespace {

namespace fs = std::filesystem;
using testing::quote;
using testing::run_mhc;
using testing::slurp;

class SafeOutputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::scratch("safe_out_" + std::to_string(counter_++)));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const st::testing::RandomSite s = st::testing::random_site(2, 16, 2, 5);
    st::site_inputs_writer(s.params, s.weights.view(), s.inputs()).write(path("in"));
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  testing::RunResult site(const std::string& in, const std::string& out) const {
    return run_mhc("site --backend cpu --inputs " + quote(in) + " --out " + quote(out));
  }
  testing::RunResult site_json(const std::string& in, const std::string& out,
                               const std::string& json) const {
    return run_mhc("site --backend cpu --inputs " + quote(in) + " --out " + quote(out) +
                   " --json " + quote(json));
  }
  static void put(const std::string& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path dir_;
  static inline int counter_ = 0;
};

TEST_F(SafeOutputCli, ASymlinkAtTheOldTemporaryNameIsNotFollowed) {
  put(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("out.tmp"));
  const auto r = site(path("in"), path("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(path("victim")), "precious");
  EXPECT_TRUE(fs::is_symlink(path("out.tmp")));
}

TEST_F(SafeOutputCli, AnInputNamedOutTmpSurvives) {
  fs::copy_file(path("in"), path("x.tmp"));
  const std::string before = slurp(path("x.tmp"));
  const auto r = site(path("x.tmp"), path("x"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(slurp(path("x.tmp")), before);
  EXPECT_NO_THROW(st::File::open(path("x")));
}

TEST_F(SafeOutputCli, TheInputAsTheOutputIsRefused) {
  const std::string before = slurp(path("in"));
  const auto r = site(path("in"), path("in"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("same file as the input"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(path("in")), before);
}

TEST_F(SafeOutputCli, ADirectoryOrEmptyOutputIsRefusedAndNothingDeleted) {
  fs::create_directory(path("dir"));
  put(path("dir.tmp"), "mine");
  const auto d = site(path("in"), path("dir"));
  EXPECT_EQ(d.status, 2);
  EXPECT_NE(d.err.find("a directory"), std::string::npos) << d.err;
  EXPECT_EQ(slurp(path("dir.tmp")), "mine");
  // `--out ""` used to write and then delete ./.tmp.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  put(".tmp", "also mine");
  const auto e = site(path("in"), "");
  fs::current_path(cwd);
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find("output path is empty"), std::string::npos) << e.err;
  EXPECT_EQ(slurp(path(".tmp")), "also mine");
}

TEST_F(SafeOutputCli, NonFiniteOutputsFromFiniteInputsAreAnError) {
  st::testing::RandomSite s = st::testing::random_site(2, 16, 2, 6);
  for (float& v : s.weights.hc_fn) v = 3e38f;  // finite, but the projection overflows
  st::site_inputs_writer(s.params, s.weights.view(), s.inputs()).write(path("overflow"));
  const auto r = site(path("overflow"), path("out"));
  EXPECT_EQ(r.status, 2) << r.out;
  for (const char* f : {"not written", "output '", "at token 0", "flat element", "finite inputs"}) {
    EXPECT_NE(r.err.find(f), std::string::npos) << f << " not in " << r.err;
  }
  EXPECT_FALSE(fs::exists(path("out")));
}

TEST_F(SafeOutputCli, TheReportNeverReplacesTheInputOrTheOutput) {
  const std::string input = slurp(path("in"));
  const auto on_input = site_json(path("in"), path("out"), path("in"));
  EXPECT_EQ(on_input.status, 2);
  EXPECT_TRUE(testing::contains(on_input.err, "same file as the input")) << on_input.err;
  EXPECT_EQ(slurp(path("in")), input);
  EXPECT_FALSE(fs::exists(path("out")));  // refused before the work

  // --out does not exist yet: compared by path, also through another spelling of it.
  const auto on_out = site_json(path("in"), path("out"), (dir_ / "." / "out").string());
  EXPECT_EQ(on_out.status, 2);
  EXPECT_TRUE(testing::contains(on_out.err, "same file as the output")) << on_out.err;
  EXPECT_FALSE(fs::exists(path("out")));

  const auto fine = site_json(path("in"), path("out"), path("report.json"));
  ASSERT_EQ(fine.status, 0) << fine.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("report.json"))).at("output"), path("out"));
  EXPECT_NO_THROW(st::File::open(path("out")));
}

TEST_F(SafeOutputCli, ACheckpointFileIsNeverReplacedByTheReport) {
  const std::string ck = path("ck");
  ASSERT_EQ(run_mhc("export-example " + quote(ck) + " --hidden 64 --layers 2").status, 0);
  const std::string shard = (fs::path(ck) / "model-00001-of-00002.safetensors").string();
  const std::string before = slurp(shard);
  const auto r =
      run_mhc("run --backend cpu --tokens 1 --weights " + quote(ck) + " --json " + quote(shard));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(testing::contains(r.err, "same file as the input")) << r.err;
  EXPECT_EQ(slurp(shard), before);

  // export-example's own files: refused before anything is written.
  const std::string fresh = path("ck2");
  const auto e = run_mhc("export-example " + quote(fresh) + " --json " +
                         quote((fs::path(fresh) / "config.json").string()));
  EXPECT_EQ(e.status, 2);
  EXPECT_TRUE(testing::contains(e.err, "same file as the output")) << e.err;
  EXPECT_FALSE(fs::exists(fresh));
}

TEST_F(SafeOutputCli, APathThatIsNotUtf8IsReplacedNotAnInternalError) {
  const std::string odd = path("in\xff");
  fs::copy_file(path("in"), odd);
  const auto r = site_json(odd, path("out"), path("report.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto doc = nlohmann::json::parse(slurp(path("report.json")));
  EXPECT_EQ(doc.at("inputs"), path("in") + "\xef\xbf\xbd");  // U+FFFD
  const auto meta = st::File::open(path("out")).metadata();
  EXPECT_EQ(meta.at("inputs"), path("in") + "\xef\xbf\xbd");
  const auto to_stdout = run_mhc("site --backend cpu --inputs " + quote(odd) + " --out " +
                                 quote(path("out2")) + " --json");
  ASSERT_EQ(to_stdout.status, 0) << to_stdout.err;
  EXPECT_TRUE(nlohmann::json::parse(to_stdout.out).is_object());
}

TEST_F(SafeOutputCli, AReplacedReportKeepsItsPermissions) {
  const std::string report = path("private.json");
  std::ofstream(report) << "old";
  ASSERT_EQ(::chmod(report.c_str(), 0600), 0);
  ASSERT_EQ(run_mhc("dispatch --arch 9.0 --json " + quote(report)).status, 0);
  struct stat st {};
  ASSERT_EQ(::stat(report.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(nlohmann::json::parse(slurp(report)).is_object());
}

// Before the sweep (and before looking for a GPU): a directory as the tactics file.
TEST_F(SafeOutputCli, TuneChecksItsOutputFirst) {
  fs::create_directory(path("tactics"));
  const auto r = run_mhc("tune --out " + quote(path("tactics")));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(testing::contains(r.err, "is a directory")) << r.err;
}

}  // namespace
}  // namespace mhc::cli
