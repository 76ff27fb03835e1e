// RedisStore: the Store (coordinator/store/store.h) kept in Redis. Key schema: coordinator/store/STORE.md.
//
// Keys (all under a configurable prefix, default "ak:"):
//   <prefix>campaigns       hash   campaign_id -> CampaignRecord JSON
//   <prefix>jobs            hash   job_id      -> JobRecord JSON
//   <prefix>results         hash   job_id      -> ResultRecord JSON (one row per job)
//   <prefix>results:order   list   job_ids in the order their result was first stored
//   <prefix>best            hash   tuning key  -> TunedEntry JSON (common/tuning.h)
//   <prefix>best:latency    hash   tuning key  -> its latency [us], for the put_best script
//
// put_result is one Lua script (EVALSHA, falling back to EVAL after a server restart emptied the
// script cache), so a result row, its place in the order list and the job record are written
// together or not at all. put_jobs pipelines HSETs of at most kJobsPerCommand fields each.
//
// Connection: one hiredis connection, opened by connect(). When a command fails because the
// connection dropped (EOF, I/O error, timeout), the store reconnects once and repeats the command;
// if that fails too the call returns kUnavailable and the next call starts with a fresh
// connection attempt. Repeating is safe because every write is idempotent: HSET overwrites with
// the same value, and the put_result script keeps the first row (a repeat of a put_result whose
// first try did reach Redis reports *inserted == false; the row stored is the caller's row).
//
// Not thread-safe, like every Store: one thread owns a RedisStore. Several RedisStores (several
// connections) may share one Redis; put_result stays one row per job across them.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/sigpipe.h"
#include "common/status.h"
#include "coordinator/store/store.h"

struct redisContext;
struct redisReply;

namespace ak {

// Where a Redis URL points. Accepted forms:
//   redis://host[:port][/db]       TCP; port defaults to 6379, db to 0
//   unix:///absolute/path.sock[?db=N]
struct RedisEndpoint {
  bool is_unix = false;
  std::string host;  // TCP only
  int port = 6379;   // TCP only
  std::string path;  // unix only
  int db = 0;
};
// kInvalidArgument with a message naming the accepted forms when `url` is none of them.
Result<RedisEndpoint> parse_redis_url(const std::string& url);

class RedisStore final : public Store {
 public:
  // Fields per HSET in put_jobs: bounds the size of one command (job records carry their source).
  static constexpr size_t kJobsPerCommand = 500;
  static constexpr const char* kDefaultPrefix = "ak:";

  // Connects, selects the database and checks the server answers PING. `timeout` bounds the
  // connect and every later command. Fails with kInvalidArgument for a bad URL and kUnavailable
  // (message: what was tried, the OS error, what to do) when Redis cannot be reached.
  static Result<std::unique_ptr<RedisStore>> connect(const std::string& url, std::chrono::milliseconds timeout,
                                                     std::string prefix = kDefaultPrefix);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  Status put_campaign(const CampaignRecord& c) override;
  Status put_jobs(const std::vector<JobRecord>& jobs) override;
  Status put_sources(const std::map<std::string, std::string>& sources) override;
  Status put_result(const ResultRecord& result, const JobRecord& job, bool* inserted) override;
  // Campaigns sorted by campaign_id; jobs sorted by (submitted_wall_ms, job_id), since a hash keeps
  // no order; results in first-insert order. A stored record that does not parse is kInternal
  // naming its key and field, rather than a silently shorter snapshot.
  Result<StoreSnapshot> load() override;
  Result<int64_t> result_count() override;
  // One Lua script, like put_result: compares with the stored latency and writes entry and
  // latency together.
  Status put_best(const TunedEntry& entry, bool* stored) override;
  Result<std::vector<TunedEntry>> load_best() override;

  const std::string& url() const { return url_; }
  const std::string& prefix() const { return prefix_; }
  // The key names, for tools and tests that read Redis directly.
  std::string campaigns_key() const { return prefix_ + "campaigns"; }
  std::string jobs_key() const { return prefix_ + "jobs"; }
  std::string results_key() const { return prefix_ + "results"; }
  std::string results_order_key() const { return prefix_ + "results:order"; }
  std::string best_key() const { return prefix_ + "best"; }
  std::string best_latency_key() const { return prefix_ + "best:latency"; }
  std::string sources_key() const { return prefix_ + "sources"; }

 private:
  struct ContextFree {
    void operator()(redisContext* c) const;
  };
  struct ReplyFree {
    void operator()(redisReply* r) const;
  };
  using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;
  using Command = std::vector<std::string>;

  RedisStore(std::string url, RedisEndpoint endpoint, std::chrono::milliseconds timeout, std::string prefix);
  // Opens ctx_ (connect, SELECT, PING). On failure ctx_ is null.
  Status open();
  // Sends `commands` in one pipeline and returns one reply per command (error replies included).
  // Reconnects and repeats the whole pipeline once if the connection drops.
  Result<std::vector<ReplyPtr>> exec(const std::vector<Command>& commands);
  // One command; an error reply becomes a non-ok Status.
  Result<ReplyPtr> exec_one(const Command& command);
  Status unavailable(const std::string& what) const;
  // EVALSHA of a loaded script, EVAL of its text after a NOSCRIPT; the reply must be an integer.
  Result<ReplyPtr> eval(const std::string& sha, const char* script, const Command& keys_and_args, int key_count,
                        const std::string& what);

  std::string url_;
  RedisEndpoint endpoint_;
  std::chrono::milliseconds timeout_;
  std::string prefix_;
  std::string put_result_sha_;
  std::string put_best_sha_;
  std::unique_ptr<redisContext, ContextFree> ctx_;
};

}  // namespace ak
