// WorkerIdClaim: a worker id that this process holds, so that no other live worker on the host
// uses it (issue 21, item 6).
//
// A worker's outbox file is named by its id (worker/agent.cc, <state_dir>/outbox-<id>.jsonl), and
// the coordinator accepts a result only from the worker that holds the job's lease. So an id must
// be unique among live workers (two processes under one id take each other's leases), yet stable
// across restarts (a restarted worker must find its predecessor's outbox and register under the
// same id, which releases the dead process's leases at once). A default id with the pid in it
// would orphan a crashed worker's unacknowledged results; a default id without it collides when
// two workers share a host and a device.
//
// The claim is an exclusive flock(2) on <lock_dir>/<id>.lock. The kernel drops it when the process
// ends, however it ends (SIGKILL included), so a restarted worker takes the id at once, and no two
// live processes can hold it. The file holds the holder's pid, for the error message only.
//
// Thread safety: a claim is a plain value owned by one agent; claim() may be called from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace ak {

class WorkerIdClaim {
 public:
  // Exactly `id`. Fails (kUnavailable) when another process holds it, naming its pid and what to
  // do; fails (kUnavailable) when lock_dir cannot be created or the lock file opened.
  static Result<WorkerIdClaim> claim(const std::string& lock_dir, const std::string& id);

  // The first free id of `base`, `base-2`, `base-3`, ... `base-<max_ids>` (a default id: unique
  // among the live workers that share lock_dir). Ids whose outbox in `state_dir` holds results are
  // tried first, in the same order: a restarted worker takes back an id whose results are waiting,
  // not merely the lowest free one. Fails when all max_ids are held.
  static Result<WorkerIdClaim> claim_first_free(const std::string& lock_dir, const std::string& base,
                                                const std::string& state_dir, int max_ids = 64);

  WorkerIdClaim() = default;
  WorkerIdClaim(WorkerIdClaim&& other) noexcept;
  WorkerIdClaim& operator=(WorkerIdClaim&& other) noexcept;
  WorkerIdClaim(const WorkerIdClaim&) = delete;
  WorkerIdClaim& operator=(const WorkerIdClaim&) = delete;
  ~WorkerIdClaim();  // releases the lock (the file stays: removing it would race a new claimant)

  const std::string& id() const { return id_; }
  bool held() const { return fd_ >= 0; }

 private:
  WorkerIdClaim(std::string id, int fd) : id_(std::move(id)), fd_(fd) {}
  std::string id_;
  int fd_ = -1;
};

// The instance token of worker `id` (protocol::Ready::instance): 16 hex digits, kept in
// <state_dir>/instance-<id> and read back on every start, so that a restarted worker (same id,
// same state folder) is the same instance to the coordinator and takes its id back at once, while
// a second worker given the same id elsewhere is another instance and is refused. With an empty
// state_dir a fresh token per call (a worker without a state folder is new on every start: after
// a crash its id is free again once the coordinator has forgotten the old process). Fails
// (kUnavailable) when the file can be neither read nor written.
Result<std::string> worker_instance(const std::string& state_dir, const std::string& id);

// The outbox file of worker `id` in `state_dir` (the agent's, and what claim_first_free looks for).
std::string outbox_path(const std::string& state_dir, const std::string& id);

// The host-wide folder where default ids are claimed, so that workers on one host with different
// state folders still get different ids.
inline constexpr const char* kDefaultIdLockDir = "/tmp/autokernel-worker-ids";

}  // namespace ak
