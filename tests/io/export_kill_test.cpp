// `mhc export-example DIR --force` killed (SIGKILL) at many instants of its run: after every kill
// DIR holds the old checkpoint or the new one, byte for byte and complete, and the user's own file
// in it; and the next export to DIR leaves no temporary behind, beside DIR or inside it.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "checkpoint_test_util.hpp"

namespace mhc::ckpt {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::put;
using testing::slurp;
using Clock = std::chrono::steady_clock;

// The checkpoint files of a directory, by name.
std::map<std::string, std::string> checkpoint_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& name : export_file_names()) {
    if (fs::exists(dir / name)) files[name] = slurp(dir / name);
  }
  return files;
}

// Temporaries of mhc's naming beside `dir` and inside it.
int temporaries(const fs::path& dir) {
  int count = 0;
  for (const fs::path& d : {dir.parent_path(), dir}) {
    for (const auto& e : fs::directory_iterator(d)) {
      count += e.path().filename().string().find(".mhc-") != std::string::npos;
    }
  }
  return count;
}

// Starts `mhc export-example DIR --force` (seed 2) and kills it after `delay` (or lets it finish
// when delay is negative).
void export_killed_after(const fs::path& dir, std::chrono::microseconds delay) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string d = dir.string();
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(MHC_BINARY, MHC_BINARY, "export-example", d.c_str(), "--layers", "48", "--hidden",
            "512", "--seed", "2", "--force", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (delay.count() >= 0) {
    std::this_thread::sleep_for(delay);
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(ExportKill, TheDirectoryHoldsTheOldOrTheNewCheckpointAtEveryInstant) {
  const fs::path root = fresh_dir("kill");
  ExportOptions o;
  o.layers = 48;
  o.hidden = 512;
  o.seed = 1;
  export_example((root / "old").string(), o);
  o.seed = 2;
  export_example((root / "new").string(), o);
  const auto old_files = checkpoint_of(root / "old"), new_files = checkpoint_of(root / "new");
  ASSERT_NE(old_files, new_files);
  const fs::path dir = root / "ckpt";
  auto reset = [&] {
    fs::remove_all(dir);
    fs::copy(root / "old", dir);
    put(dir / "notes.txt", "the user's");
  };
  reset();
  const auto start = Clock::now();
  export_killed_after(dir, std::chrono::microseconds(-1));
  const auto whole = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  ASSERT_EQ(checkpoint_of(dir), new_files);
  constexpr int kPoints = 16;
  int old_seen = 0, new_seen = 0;
  for (int i = 0; i <= kPoints; ++i) {
    reset();
    export_killed_after(dir, whole * i / kPoints);
    const auto now = checkpoint_of(dir);
    EXPECT_TRUE(now == old_files || now == new_files) << "killed at " << i << "/" << kPoints;
    old_seen += now == old_files;
    new_seen += now == new_files;
    EXPECT_EQ(slurp(dir / "notes.txt"), "the user's") << "killed at " << i << "/" << kPoints;
    // The next export to the same place: the new checkpoint, and nothing left behind.
    export_killed_after(dir, std::chrono::microseconds(-1));
    EXPECT_EQ(checkpoint_of(dir), new_files);
    EXPECT_EQ(slurp(dir / "notes.txt"), "the user's");
    EXPECT_EQ(temporaries(dir), 0) << "after the kill at " << i << "/" << kPoints;
  }
  std::cout << "kills that left the old checkpoint: " << old_seen << ", the new: " << new_seen
            << " (whole export " << whole.count() / 1000 << " ms)\n";
}

}  // namespace
}  // namespace mhc::ckpt
