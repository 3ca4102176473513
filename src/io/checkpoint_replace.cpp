// export-example's temporaries and its one-rename replacement of a checkpoint directory.
#include "checkpoint_replace.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>

#include "mhc/core/error.hpp"
#include "mhc/io/safe_file.hpp"

namespace mhc::ckpt::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKind = "export-";  // ".{stem}.mhc-export-{16 hex}"

// Moves `from` to `to` unless something is already at `to` (RENAME_NOREPLACE where the file
// system has it); false when it was not moved.
bool move_if_free(const fs::path& from, const fs::path& to) {
#ifdef RENAME_NOREPLACE
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
#endif
  std::error_code ec;
  if (fs::exists(fs::symlink_status(to, ec))) return false;
  return ::rename(from.c_str(), to.c_str()) == 0;
}

// Whether `entry` is a copy of `original` made by exchange_checkpoint: the same file (a hard link)
// or a symlink with the same text.
bool mirrors(const fs::path& entry, const fs::path& original) {
  struct stat a {};
  struct stat b {};
  if (::lstat(entry.c_str(), &a) != 0 || ::lstat(original.c_str(), &b) != 0) return false;
  if (S_ISREG(a.st_mode)) return S_ISREG(b.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  if (!S_ISLNK(a.st_mode) || !S_ISLNK(b.st_mode)) return false;
  std::error_code ec1, ec2;
  const fs::path ta = fs::read_symlink(entry, ec1), tb = fs::read_symlink(original, ec2);
  return !ec1 && !ec2 && ta == tb;
}

// An OutputFile temporary of one of export's files (".config.json.mhc-{16 hex}.tmp").
bool is_file_temporary(const std::string& name, const ExportNames& names) {
  return std::any_of(names.names.begin(), names.names.end(), [&](const std::string& n) {
    return io::is_temporary_name(name, n, "", ".tmp");
  });
}

// Empties a temporary directory of ours (`dir`, locked by the caller) of what export put there and
// removes it: export's marked files, file temporaries, and entries mirrored from `target`.
// Anything else goes back to `target` when its name is free there, else stays (and so does
// `dir`): nothing that was not export's is ever removed.
void clean_export_dir(const fs::path& dir, const fs::path& target, const ExportNames& names) {
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  for (const fs::path& entry : entries) {
    const std::string name = entry.filename().string();
    std::error_code type_ec;
    const bool regular = fs::is_regular_file(fs::symlink_status(entry, type_ec));
    const bool ours = regular && ((names.is_export_name(name) && names.marked(entry)) ||
                                  is_file_temporary(name, names));
    if (ours || mirrors(entry, target / name)) {
      ::unlink(entry.c_str());
    } else {
      move_if_free(entry, target / name);
    }
  }
  ::rmdir(dir.c_str());  // fails, harmlessly, when something had to stay
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

// Mirrors every entry of `target` that is not one of export's names into `fresh`; false when one
// cannot be (a directory, a special file, a failed link).
bool mirror_others(const fs::path& target, const fs::path& fresh, const ExportNames& names) {
  std::error_code ec;
  for (fs::directory_iterator it(target, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (names.is_export_name(name)) continue;
    const fs::path copy = fresh / name;
    std::error_code type_ec;
    const fs::file_status st = fs::symlink_status(it->path(), type_ec);
    if (fs::is_regular_file(st)) {
      if (::link(it->path().c_str(), copy.c_str()) != 0) return false;
    } else if (fs::is_symlink(st)) {
      std::error_code link_ec;
      const fs::path text = fs::read_symlink(it->path(), link_ec);
      if (link_ec || ::symlink(text.c_str(), copy.c_str()) != 0) return false;
    } else {
      return false;
    }
  }
  return !ec;
}

// A directory's entries made durable (best effort: some file systems refuse fsync on one).
void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

#ifdef RENAME_EXCHANGE
// Gives `fresh` the old directory's permission bits (and owner, as root), then exchanges the two;
// the mirrored entries are made durable before, the exchange after.
bool exchange(const fs::path& fresh, const fs::path& target, mode_t mode, uid_t uid, gid_t gid) {
  ::chmod(fresh.c_str(), mode & 07777);
  if (::geteuid() == 0 && ::chown(fresh.c_str(), uid, gid) != 0) return false;
  sync_dir(fresh);
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    return false;
  }
  sync_dir(target.parent_path());
  return true;
}
#endif

}  // namespace

bool ExportNames::is_export_name(const std::string& name) const {
  return std::find(names.begin(), names.end(), name) != names.end();
}

ExportTemp::ExportTemp(const fs::path& parent, const std::string& stem) {
  for (int attempt = 0; attempt < 64; ++attempt) {
    const fs::path p = parent / fmt::format(".{}.mhc-{}{}", stem, kKind, io::random_suffix());
    if (::mkdir(p.c_str(), 0777) != 0) {
      if (errno == EEXIST) continue;
      throw Error(fmt::format("{}: cannot create a temporary directory: {}", p.string(),
                              std::generic_category().message(errno)));
    }
    const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && io::lock_new_temporary(fd, p.string())) {
      path_ = p;
      lock_ = fd;
      return;
    }
    if (fd >= 0) ::close(fd);  // taken by a cleaner in the instant before the lock: another name
  }
  throw Error(fmt::format("{}: cannot create a temporary directory", parent.string()));
}

ExportTemp::~ExportTemp() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);  // only ours: new files and mirrored links
  if (lock_ >= 0) ::close(lock_);
}

void ExportTemp::release() {
  sync_dir(path_.parent_path());  // the rename into place made durable
  path_.clear();
}

void ExportTemp::remove_replaced(const fs::path& target, const ExportNames& names) {
  clean_export_dir(path_, target, names);
  path_.clear();
}

void remove_stale_exports(const fs::path& target, const ExportNames& names) {
  const std::string stem = io::temporary_stem(target.string());
  const fs::path parent = target.parent_path();
  io::remove_stale(
      parent.string(),
      [&](std::string_view name) { return io::is_temporary_name(name, stem, kKind, ""); }, true,
      [&](int, const std::string& name) { clean_export_dir(parent / name, target, names); });
  // Older versions built the new checkpoint inside the target, as ".checkpoint.mhc-export-*".
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(target, ec))) return;
  io::remove_stale(
      target.string(),
      [&](std::string_view name) { return io::is_temporary_name(name, "checkpoint", kKind, ""); },
      true, [&](int, const std::string& name) { clean_export_dir(target / name, target, names); });
}

bool exchange_checkpoint(const fs::path& target, ExportTemp& fresh, const ExportNames& names) {
#ifdef RENAME_EXCHANGE
  std::error_code ec;
  if (same_file(target, fs::current_path(ec))) return false;
  struct stat t {};
  struct stat parent {};
  if (::lstat(target.c_str(), &t) != 0 || ::stat(target.parent_path().c_str(), &parent) != 0 ||
      t.st_dev != parent.st_dev) {
    return false;  // a mount point (or gone)
  }
  // The old directory, locked like a temporary of ours: once exchanged it sits at the temporary's
  // name, and no other export may take it for a dead one's while it is emptied.
  const int old = ::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (old < 0) return false;
  if (::flock(old, LOCK_EX | LOCK_NB) != 0) {
    ::close(old);
    throw Error(fmt::format("{}: another mhc export-example is replacing it now", target.string()));
  }
  const bool exchanged = mirror_others(target, fresh.path(), names) &&
                         exchange(fresh.path(), target, t.st_mode, t.st_uid, t.st_gid);
  if (exchanged) fresh.remove_replaced(target, names);
  ::close(old);
  return exchanged;
#else
  (void)target, (void)fresh, (void)names, (void)mirror_others;
  return false;
#endif
}

}  // namespace mhc::ckpt::detail
