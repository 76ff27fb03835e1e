#include "worker/outbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <spdlog/spdlog.h>

#include "common/file.h"

namespace ak {
namespace {

std::string dump_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string add_line(const ResultRecord& r) { return dump_line({{"op", "add"}, {"result", r}}); }

Status write_fully(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::unavailable("writing outbox " + path + " failed: " + std::strerror(errno));
    off += static_cast<size_t>(n);
  }
  return Status::ok_status();
}

}  // namespace

Outbox::Outbox(OutboxOptions options) : options_(std::move(options)) {}

Outbox::~Outbox() {
  if (fd_ >= 0) ::close(fd_);
}

Status Outbox::open(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.path.empty()) return Status::ok_status();
  std::ifstream in(options_.path);
  if (in) {
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      try {
        auto j = nlohmann::json::parse(line);
        const std::string op = j.at("op").get<std::string>();
        if (op == "add") {
          auto r = j.at("result").get<ResultRecord>();
          Key key{r.job_id, r.attempt};
          Entry& e = entries_[key];
          e.result = std::move(r);
          e.seq = next_seq_++;
          e.due_ms = now_ms;
          e.interval_ms = options_.resend_ms;
        } else if (op == "ack") {
          entries_.erase(Key{j.at("job_id").get<std::string>(), j.at("attempt").get<int>()});
        } else {
          spdlog::warn("outbox {}:{}: unknown op '{}', line skipped", options_.path, lineno, op);
        }
      } catch (const std::exception& e) {
        spdlog::warn("outbox {}:{}: unreadable line skipped ({})", options_.path, lineno, e.what());
      }
    }
    if (in.bad()) return Status::unavailable("reading outbox " + options_.path + " failed");
  }
  if (!entries_.empty())
    spdlog::info("outbox {}: {} unacknowledged result(s) to resend", options_.path, entries_.size());
  return compact_locked();
}

Status Outbox::compact_locked() {
  std::vector<const Entry*> live;
  for (const auto& [key, e] : entries_) live.push_back(&e);
  std::string data;
  for (const auto& r : ordered_locked(live)) data += add_line(r);
  if (Status s = write_file_atomically(options_.path, data); !s.ok())
    return Status::unavailable("cannot rewrite outbox: " + s.message() + "; check the worker's state directory");
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(options_.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) return Status::unavailable("cannot open outbox " + options_.path + ": " + std::strerror(errno));
  dead_lines_ = 0;
  return Status::ok_status();
}

Status Outbox::append_locked(const std::string& line) {
  if (options_.path.empty()) return Status::ok_status();
  if (fd_ < 0) return Status::unavailable("outbox " + options_.path + " is not open; call open() first");
  Status s = write_fully(fd_, line, options_.path);
  if (s.ok() && options_.fsync_each && ::fsync(fd_) != 0)
    s = Status::unavailable("fsync of outbox " + options_.path + " failed: " + std::strerror(errno));
  return s;
}

Status Outbox::add(const ResultRecord& result, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{result.job_id, result.attempt};
  auto [it, inserted] = entries_.try_emplace(key);
  if (!inserted) ++dead_lines_;
  Entry& e = it->second;
  e.result = result;
  e.seq = next_seq_++;
  e.interval_ms = options_.resend_ms;
  e.due_ms = now_ms + options_.resend_ms;
  return append_locked(add_line(result));
}

bool Outbox::ack(const std::string& job_id, int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.erase(Key{job_id, attempt}) == 0) return false;
  if (!options_.path.empty()) {
    Status s = append_locked(dump_line({{"op", "ack"}, {"job_id", job_id}, {"attempt", attempt}}));
    if (!s.ok()) spdlog::warn("{}", s.message());
    dead_lines_ += 2;  // the add and the ack
    if (dead_lines_ > 256 && dead_lines_ > static_cast<int64_t>(entries_.size())) {
      Status c = compact_locked();
      if (!c.ok()) spdlog::warn("outbox compaction failed: {}", c.message());
    }
  }
  return true;
}

std::vector<ResultRecord> Outbox::ordered_locked(const std::vector<const Entry*>& entries) const {
  std::vector<const Entry*> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  std::vector<ResultRecord> out;
  out.reserve(sorted.size());
  for (const Entry* e : sorted) out.push_back(e->result);
  return out;
}

std::vector<ResultRecord> Outbox::due(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Entry*> ready;
  for (auto& [key, e] : entries_) {
    if (e.due_ms > now_ms) continue;
    e.interval_ms = std::min(options_.max_resend_ms, std::max<int64_t>(1, e.interval_ms) * 2);
    e.due_ms = now_ms + e.interval_ms;
    ready.push_back(&e);
  }
  return ordered_locked(ready);
}

std::vector<ResultRecord> Outbox::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const Entry*> live;
  for (const auto& [key, e] : entries_) live.push_back(&e);
  return ordered_locked(live);
}

void Outbox::restart_backoff(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, e] : entries_) {
    e.interval_ms = options_.resend_ms;
    e.due_ms = now_ms + options_.resend_ms;
  }
}

bool Outbox::contains(const std::string& job_id, int attempt) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(Key{job_id, attempt}) > 0;
}

size_t Outbox::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::optional<int64_t> Outbox::next_due_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<int64_t> best;
  for (const auto& [key, e] : entries_)
    if (!best || e.due_ms < *best) best = e.due_ms;
  return best;
}

}  // namespace ak
