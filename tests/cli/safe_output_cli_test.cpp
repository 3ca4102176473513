// `mhc site --out`: the data-loss cases of issue 15 end to end (the old writer used OUT.tmp with
// fopen("wb")), and non-finite outputs from finite inputs refused with the output and position.
#include <filesystem>

#include "site_dir_fixture.hpp"

namespace mhc::cli {
namespace {

namespace fs = std::filesystem;
using testing::quote;
using testing::run_mhc;
using testing::slurp;

class SafeOutputCli : public testing::SiteDirTest {
 protected:
  testing::RunResult site(const std::string& in, const std::string& out) const {
    return run_mhc("site --backend cpu --inputs " + quote(in) + " --out " + quote(out));
  }
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

}  // namespace
}  // namespace mhc::cli
