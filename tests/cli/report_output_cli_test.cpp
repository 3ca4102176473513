// `--json FILE` is an output like `--out`: checked before the work against every file the command
// reads or writes (an input, a checkpoint's shard, --out itself), never replacing one; a path that
// is not UTF-8 becomes U+FFFD in the report instead of an internal error; a replaced file keeps its
// permission bits; `tune --out` is checked before the sweep.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "site_dir_fixture.hpp"

namespace mhc::cli {
namespace {

namespace fs = std::filesystem;
using testing::quote;
using testing::run_mhc;
using testing::slurp;

class ReportOutputCli : public testing::SiteDirTest {
 protected:
  testing::RunResult site(const std::string& in, const std::string& out,
                          const std::string& json) const {
    return run_mhc("site --backend cpu --inputs " + quote(in) + " --out " + quote(out) +
                   " --json " + quote(json));
  }
};

TEST_F(ReportOutputCli, TheReportNeverReplacesTheInputOrTheOutput) {
  const std::string input = slurp(path("in"));
  const auto on_input = site(path("in"), path("out"), path("in"));
  EXPECT_EQ(on_input.status, 2);
  EXPECT_TRUE(testing::contains(on_input.err, "same file as the input")) << on_input.err;
  EXPECT_EQ(slurp(path("in")), input);
  EXPECT_FALSE(fs::exists(path("out")));  // refused before the work

  // --out does not exist yet: compared by path, also through another spelling of it.
  const auto on_out = site(path("in"), path("out"), (dir_ / "." / "out").string());
  EXPECT_EQ(on_out.status, 2);
  EXPECT_TRUE(testing::contains(on_out.err, "same file as the output")) << on_out.err;
  EXPECT_FALSE(fs::exists(path("out")));

  const auto fine = site(path("in"), path("out"), path("report.json"));
  ASSERT_EQ(fine.status, 0) << fine.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(path("report.json"))).at("output"), path("out"));
  EXPECT_NO_THROW(st::File::open(path("out")));
}

TEST_F(ReportOutputCli, ACheckpointFileIsNeverReplacedByTheReport) {
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

TEST_F(ReportOutputCli, APathThatIsNotUtf8IsReplacedNotAnInternalError) {
  const std::string odd = path("in\xff");
  fs::copy_file(path("in"), odd);
  const auto r = site(odd, path("out"), path("report.json"));
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

TEST_F(ReportOutputCli, AReplacedReportKeepsItsPermissions) {
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
TEST_F(ReportOutputCli, TuneChecksItsOutputFirst) {
  fs::create_directory(path("tactics"));
  const auto r = run_mhc("tune --out " + quote(path("tactics")));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(testing::contains(r.err, "is a directory")) << r.err;
}

}  // namespace
}  // namespace mhc::cli
