// Every file mhc writes goes through OutputFile, and every file it reads whole through
// read_regular_file. Writing: a temporary created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, a
// random name) next to the target, written, fsync'd, then renamed onto the target, so a reader
// sees the old file or the new one, a symlink planted at a guessable name is never followed, and a
// failure removes only the temporary mhc created. Refused up front: an empty path, a directory or
// any other non-regular file as the target, and a target that is the same file as one of the
// inputs (st_dev/st_ino, so a symlink or hard link to an input is caught too). Reading: the file is
// opened with O_NONBLOCK and checked with fstat before any read, so a FIFO or a device is refused
// instead of blocking. See docs/limits.md.
// C++17 on purpose: CUDA sources (compiled as C++17) write traces through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mhc::io {

// Throws mhc::Error unless `path` may be written as a regular file that is none of `inputs`
// (inputs that do not exist are ignored). Cheap: call it before a long computation too.
void check_output(const std::string& path, const std::vector<std::string>& inputs = {});

class OutputFile {
 public:
  // check_output(path, inputs), then creates the temporary. Throws mhc::Error.
  explicit OutputFile(std::string path, const std::vector<std::string>& inputs = {});
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // removes the temporary unless commit() succeeded

  void write(const void* data, size_t size);
  void write(std::string_view text);
  // fsync, close, rename onto the target, fsync the directory. Throws mhc::Error.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  void discard() noexcept;
  void keep_mode_of_target() noexcept;
  std::string path_;
  std::string temp_;
  int fd_ = -1;
};

// OutputFile in one call.
void write_file(const std::string& path, std::string_view text,
                const std::vector<std::string>& inputs = {});

// The whole of a regular file of at most `max_bytes` bytes; `what` names it in errors ("config
// file"). Refuses a FIFO, a device, a directory, a symlink loop (reported as such) without
// blocking.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what);

// A read-only descriptor of a regular file, opened with O_NONBLOCK | O_CLOEXEC and checked with
// fstat; `size` receives its size. The caller closes it. Throws mhc::Error.
int open_regular_file(const std::string& path, uint64_t& size);

// A random file-name component (16 hex digits) for temporaries.
std::string random_suffix();

// ---- Temporaries left behind by a process killed mid-write (SIGKILL, a power loss) ----
// Every temporary mhc creates (an OutputFile's file, export-example's directories) is named
// ".{stem}.mhc-{kind}{16 hex}{suffix}" after its target and held under an exclusive flock(2) from
// creation until it is renamed into place or removed; the kernel drops the lock when the process
// dies. So a temporary of that name that can be locked is stale, and the next write to the same
// place removes it. Nothing else is ever removed: not a name of another form, not a symlink, not
// another user's file, not a temporary a live process holds.

// Whether `name` is ".{stem}.mhc-{kind}" + 16 lowercase hex digits + `suffix`.
bool is_temporary_name(std::string_view name, std::string_view stem, std::string_view kind,
                       std::string_view suffix);
// The stem of a target's temporaries: its file name cut to 64 bytes (the temporary's name stays
// under NAME_MAX; whole, it helps a person who finds one).
std::string temporary_stem(const std::string& target);
// Takes the lock of a temporary just created (`fd` open on it, `path` its name) and checks that
// the name still refers to it (a cleaner may have taken it in the instant before the lock).
// Returns false when it does not: the caller closes fd and creates another.
bool lock_new_temporary(int fd, const std::string& path);
// Calls `remove(dirfd, name)` for every entry of directory `dir` whose name `ours` accepts that is
// stale: a regular file (or, with `directories`, a directory) owned by this user, not a symlink,
// whose lock can be taken. The lock is held during the call. Errors are ignored (a temporary that
// cannot be examined is left where it is). At most 100,000 entries are examined.
void remove_stale(const std::string& dir, const std::function<bool(std::string_view)>& ours,
                  bool directories, const std::function<void(int, const std::string&)>& remove);
// remove_stale for OutputFile's temporaries of `target` (".NAME.mhc-{16 hex}.tmp" beside it).
void remove_stale_temporaries(const std::string& target);

}  // namespace mhc::io
