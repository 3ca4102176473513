// Safe output (exclusive temporary + fsync + rename) and non-blocking input of regular files.
#include "mhc/io/safe_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "mhc/core/error.hpp"

namespace mhc::io {

namespace {

namespace fs = std::filesystem;

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string errno_text(int err) {
  if (err == ELOOP) return "a symlink loop (too many levels of symbolic links)";
  return std::strerror(err);
}

std::string dir_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// Writes all of [data, data + size) to fd, retrying short writes and EINTR.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

// The directory the output goes to must exist and be writable: checked before the work, so that a
// typo in a path is not reported after an hour of it.
void check_output_dir(const std::string& path) {
  const std::string dir = dir_of(path);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) {
    const int err = errno;
    throw Error(
        fmt::format("{}: cannot write the output: its directory {} {}", path, dir,
                    err == ENOENT ? "does not exist" : "cannot be examined: " + errno_text(err)));
  }
  if (!S_ISDIR(d.st_mode)) {
    throw Error(fmt::format("{}: cannot write the output: {} is not a directory", path, dir));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw Error(fmt::format("{}: cannot write the output: no file can be created in {}: {}", path,
                            dir, errno_text(errno)));
  }
}

}  // namespace

std::string random_suffix() {
  std::random_device rd;
  const uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

void check_output(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty()) throw Error("the output path is empty");
  struct stat out {};
  if (::stat(path.c_str(), &out) != 0) {
    const int err = errno;
    struct stat link {};
    // A missing file is fine; a dangling or looping symlink is replaced, not followed.
    if (err == ENOENT || (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))) {
      return check_output_dir(path);
    }
    throw Error(fmt::format("{}: cannot write the output: {}", path, errno_text(err)));
  }
  if (!S_ISREG(out.st_mode)) {
    throw Error(fmt::format("{}: the output is {}; give a file name", path, kind_of(out.st_mode)));
  }
  for (const std::string& in : inputs) {
    struct stat s {};
    if (::stat(in.c_str(), &s) == 0 && s.st_dev == out.st_dev && s.st_ino == out.st_ino) {
      throw Error(
          fmt::format("{}: the output is the same file as the input {}; writing it would "
                      "destroy the input",
                      path, in));
    }
  }
  check_output_dir(path);
}

bool is_temporary_name(std::string_view name, std::string_view stem, std::string_view kind,
                       std::string_view suffix) {
  const std::string prefix = fmt::format(".{}.mhc-{}", stem, kind);
  if (name.size() != prefix.size() + 16 + suffix.size() ||
      name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return false;
  }
  for (char c : name.substr(prefix.size(), 16)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string temporary_stem(const std::string& target) {
  return fs::path(target).filename().string().substr(0, 64);
}

bool lock_new_temporary(int fd, const std::string& path) {
  // Blocking: a cleaner holds the lock only while it looks at (and removes) the file.
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return true;  // no locks on this file system: nothing can be cleaned either
  }
  struct stat ours {};
  struct stat named {};
  return ::fstat(fd, &ours) == 0 && ::lstat(path.c_str(), &named) == 0 &&
         ours.st_dev == named.st_dev && ours.st_ino == named.st_ino;
}

void remove_stale(const std::string& dir, const std::function<bool(std::string_view)>& ours,
                  bool directories, const std::function<void(int, const std::string&)>& remove) {
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return;
  DIR* listing = ::fdopendir(::dup(dirfd));
  if (listing == nullptr) return (void)::close(dirfd);
  std::vector<std::string> names;
  int examined = 0;
  for (dirent* e = ::readdir(listing); e != nullptr && examined < 100'000;
       e = ::readdir(listing), ++examined) {
    if (ours(e->d_name)) names.emplace_back(e->d_name);
  }
  ::closedir(listing);
  for (const std::string& name : names) {
    const int flags =
        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (directories ? O_DIRECTORY : 0);
    const int fd = ::openat(dirfd, name.c_str(), flags);
    if (fd < 0) continue;  // a symlink (O_NOFOLLOW), gone, or not ours to open
    struct stat held {};
    struct stat named {};
    const bool kind =
        ::fstat(fd, &held) == 0 && (directories ? S_ISDIR(held.st_mode) : S_ISREG(held.st_mode));
    // Still the entry that was opened, once the lock is ours (no live writer holds it).
    if (kind && held.st_uid == ::geteuid() && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dirfd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      remove(dirfd, name);
    }
    ::close(fd);
  }
  ::close(dirfd);
}

void remove_stale_temporaries(const std::string& target) {
  const std::string stem = temporary_stem(target);
  remove_stale(
      dir_of(target),
      [&](std::string_view name) { return is_temporary_name(name, stem, "", ".tmp"); }, false,
      [](int dirfd, const std::string& name) { ::unlinkat(dirfd, name.c_str(), 0); });
}

OutputFile::OutputFile(std::string path, const std::vector<std::string>& inputs)
    : path_(std::move(path)) {
  check_output(path_, inputs);
  const std::string dir = dir_of(path_);
  const std::string stem = temporary_stem(path_);
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string temp =
        (fs::path(dir) / fmt::format(".{}.mhc-{}.tmp", stem, random_suffix())).string();
    fd_ = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0 && !lock_new_temporary(fd_, temp)) {
      ::close(fd_);  // removed by a cleaner before the lock: another name
      fd_ = -1;
      continue;
    }
    if (fd_ >= 0) {
      temp_ = std::move(temp);
      keep_mode_of_target();
      remove_stale_temporaries(path_);  // ours is locked: only those of dead writers go
      return;
    }
    if (errno != EEXIST) break;
  }
  throw Error(
      fmt::format("{}: cannot create a temporary file in {}: {}", path_, dir, errno_text(errno)));
}

// A file replaced keeps its permission bits (a 0600 report stays private), without set-id bits;
// a new one gets 0666 less the umask.
void OutputFile::keep_mode_of_target() noexcept {
  struct stat old {};
  if (::lstat(path_.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    (void)::fchmod(fd_, old.st_mode & 0777);  // best effort: the owner may differ
  }
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());  // ours: created with O_EXCL
  temp_.clear();
}

void OutputFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw Error(fmt::format("{}: write after commit", path_));
  if (!write_all(fd_, static_cast<const char*>(data), size)) {
    const int err = errno;
    discard();
    throw Error(fmt::format("{}: write failed: {}", path_, errno_text(err)));
  }
}

void OutputFile::write(std::string_view text) { write(text.data(), text.size()); }

void OutputFile::commit() {
  if (fd_ < 0) throw Error(fmt::format("{}: commit without a temporary", path_));
  const bool synced = ::fsync(fd_) == 0;
  const int sync_err = errno;
  // The lock lives as long as any descriptor of the open file: this one keeps it past close()
  // until the rename, so that no cleaner takes the finished temporary for a dead writer's.
  const int lock = ::dup(fd_);
  const bool closed = ::close(fd_) == 0;
  const int close_err = errno;
  fd_ = -1;
  if (!synced || !closed) {
    discard();
    if (lock >= 0) ::close(lock);
    throw Error(
        fmt::format("{}: write failed: {}", path_, errno_text(synced ? close_err : sync_err)));
  }
  const bool renamed = ::rename(temp_.c_str(), path_.c_str()) == 0;
  const int err = errno;
  if (!renamed) discard();
  if (lock >= 0) ::close(lock);
  if (!renamed) {
    throw Error(
        fmt::format("{}: cannot move the finished file into place: {}", path_, errno_text(err)));
  }
  temp_.clear();
  // The rename itself is durable only once the directory is; best effort (some file systems
  // refuse fsync on a directory).
  const int dir = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file(const std::string& path, std::string_view text,
                const std::vector<std::string>& inputs) {
  OutputFile out(path, inputs);
  out.write(text);
  out.commit();
}

int open_regular_file(const std::string& path, uint64_t& size) {
  if (path.empty()) throw Error("an input path is empty");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", path, errno_text(errno)));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot stat: {}", path, errno_text(err)));
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file ({})", path, kind_of(sb.st_mode)));
  }
  size = uint64_t(sb.st_size);
  return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view what) {
  uint64_t size = 0;
  const int fd = open_regular_file(path, size);
  if (size > max_bytes) {
    ::close(fd);
    throw Error(
        fmt::format("{}: {} bytes is too large for a {} (limit {})", path, size, what, max_bytes));
  }
  std::string text(size_t(size), '\0');
  size_t got = 0;
  int err = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    got += size_t(n);
  }
  ::close(fd);
  if (got != text.size()) {
    throw Error(fmt::format("{}: cannot read the {}: {}", path, what,
                            err ? errno_text(err) : "the file shrank while it was read"));
  }
  return text;
}

}  // namespace mhc::io
