#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ak {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Writes all of `data` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::not_found("cannot read " + path + ": " + errno_text());
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Status s = Status::unavailable("reading " + path + " failed: " + errno_text());
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string read_tail(const std::string& path, size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const off_t from = size > static_cast<off_t>(bytes) ? size - static_cast<off_t>(bytes) : 0;
  std::string out;
  if (size > 0 && ::lseek(fd, from, SEEK_SET) == from) {
    out.resize(static_cast<size_t>(size - from));
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return out;
}

Status write_file(const std::string& path, std::string_view data) {
  // O_NOFOLLOW: a symbolic link planted at `path` (a confined step writes in the folders these files
  // go to) is refused, never written through.
  // O_NONBLOCK and the check below: a FIFO planted there would block the open (or the writes)
  // forever; only a regular file is written, never a device or a pipe.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) return Status::unavailable("cannot create " + path + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || ::ftruncate(fd, 0) != 0) {
    ::close(fd);
    return Status::unavailable("cannot write " + path + ": not a regular file, or it cannot be truncated");
  }
  Status s;
  if (!write_all(fd, data)) s = Status::unavailable("cannot write " + path + ": " + errno_text() + " (disk full?)");
  if (::close(fd) != 0 && s.ok()) s = Status::unavailable("cannot write " + path + ": " + errno_text());
  return s;
}

Status write_file_atomically(const std::string& path, std::string_view data) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path target(path);
  const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp-" +
                                                   std::to_string(getpid()) + "-" + std::to_string(counter++)))
                              .string();
  // A fresh file, never one found there: whatever sits at the temporary's name (a symbolic link
  // planted by a confined step, a leftover of a crashed process of the same pid) is removed, not
  // written through. The rename then replaces `path` itself, a link there included.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0) return Status::unavailable("cannot create " + tmp + " to replace " + path + ": " + errno_text());
  Status s;
  if (!write_all(fd, data)) {
    s = Status::unavailable("cannot write " + tmp + ": " + errno_text() + " (disk full?)");
  } else if (::fsync(fd) != 0) {
    s = Status::unavailable("fsync of " + tmp + " failed: " + errno_text());
  }
  if (::close(fd) != 0 && s.ok()) s = Status::unavailable("cannot write " + tmp + ": " + errno_text());
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = Status::unavailable("cannot rename " + tmp + " to " + path + ": " + errno_text());
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace ak
