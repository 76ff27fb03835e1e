#include "worker/worker_id.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace ak {
namespace {

// A file name from a worker id ("host/gpu:0" -> "host_gpu_0").
std::string file_safe(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return out.empty() ? "worker" : out;
}

std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && !std::isdigit(static_cast<unsigned char>(pid.back()))) pid.pop_back();
  return pid.empty() ? std::string("unknown") : pid;
}

// Opens and locks <lock_dir>/<id>.lock: the fd, -1 when another process holds it (its pid in
// *holder), or an error.
Result<int> try_lock(const std::string& lock_dir, const std::string& id, std::string* holder) {
  std::error_code ec;
  std::filesystem::create_directories(lock_dir, ec);
  // Several users may share a host's lock folder: every lock file is theirs to create.
  if (!ec)
    std::filesystem::permissions(lock_dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit,
                                 std::filesystem::perm_options::add, ec);
  const std::string path = lock_dir + "/" + file_safe(id) + ".lock";
  // O_NOFOLLOW: the folder may be shared by every user of the host (/tmp); a lock "file" that is
  // a symlink planted by another user must not make a root worker truncate what it points to.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return Status::unavailable("cannot open the worker id lock " + path + ": " + std::strerror(errno) +
                               "; give --state-dir a folder this user can write");
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) *holder = holder_pid(fd);
    close(fd);
    if (err == EWOULDBLOCK) return -1;
    return Status::unavailable("cannot lock " + path + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) == 0) {
    ssize_t n = pwrite(fd, pid.data(), pid.size(), 0);
    (void)n;  // the pid is only for a message
  }
  return fd;
}

}  // namespace

Result<std::string> worker_instance(const std::string& state_dir, const std::string& id) {
  auto fresh = [] {
    std::random_device rd;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08x%08x", static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
    return std::string(hex);
  };
  if (state_dir.empty()) return fresh();
  const std::string path = state_dir + "/instance-" + file_safe(id);
  {
    std::ifstream in(path);
    std::string kept;
    if (in && std::getline(in, kept) && !kept.empty() && kept.size() <= 64 &&
        std::all_of(kept.begin(), kept.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      return kept;
  }
  const std::string token = fresh();
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << token << "\n";
    if (!out.flush())
      return Status::unavailable("cannot write " + tmp + "; give --state-dir a folder this user can write");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::unavailable("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return token;
}

std::string outbox_path(const std::string& state_dir, const std::string& id) {
  return state_dir + "/outbox-" + file_safe(id) + ".jsonl";
}

Result<WorkerIdClaim> WorkerIdClaim::claim(const std::string& lock_dir, const std::string& id) {
  std::string holder;
  auto fd = try_lock(lock_dir, id, &holder);
  if (!fd.ok()) return fd.status();
  if (*fd < 0)
    return Status::unavailable("worker id " + id + " is in use by another live worker on this host (pid " + holder +
                               ", lock " + lock_dir + "/" + file_safe(id) +
                               ".lock); give this worker another --id, or leave --id out for a free default id");
  return WorkerIdClaim(id, *fd);
}

Result<WorkerIdClaim> WorkerIdClaim::claim_first_free(const std::string& lock_dir, const std::string& base,
                                                      const std::string& state_dir, int max_ids) {
  std::vector<std::string> with_results, rest;
  for (int i = 1; i <= max_ids; ++i) {
    const std::string id = i == 1 ? base : base + "-" + std::to_string(i);
    std::error_code ec;
    const bool waiting = !state_dir.empty() && std::filesystem::file_size(outbox_path(state_dir, id), ec) > 0 && !ec;
    (waiting ? with_results : rest).push_back(id);
  }
  with_results.insert(with_results.end(), rest.begin(), rest.end());
  for (const auto& id : with_results) {
    std::string holder;
    auto fd = try_lock(lock_dir, id, &holder);
    if (!fd.ok()) return fd.status();
    if (*fd >= 0) return WorkerIdClaim(id, *fd);
  }
  return Status::unavailable("every worker id from " + base + " to " + base + "-" + std::to_string(max_ids) +
                             " is in use by a live worker on this host (locks in " + lock_dir +
                             "); give this worker an --id");
}

WorkerIdClaim::WorkerIdClaim(WorkerIdClaim&& other) noexcept : id_(std::move(other.id_)), fd_(other.fd_) {
  other.fd_ = -1;
}

WorkerIdClaim& WorkerIdClaim::operator=(WorkerIdClaim&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    id_ = std::move(other.id_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WorkerIdClaim::~WorkerIdClaim() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace ak
