#include "coordinator/store/redis_store.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

namespace ak {

namespace {

using nlohmann::json;

// KEYS: results hash, results order list, jobs hash. ARGV: job_id, result JSON, job JSON.
// Returns 1 when the result row was inserted, 0 when a row for job_id existed already.
constexpr const char* kPutResultScript = R"lua(
local inserted = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
if inserted == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return inserted
)lua";

// KEYS: best hash, best latency hash. ARGV: tuning key, entry JSON, latency [us].
// Stores the entry unless one with a latency at most ARGV[3] is there; returns 1 when stored.
// The latencies sit in their own hash so the script compares numbers without parsing entries.
constexpr const char* kPutBestScript = R"lua(
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur and tonumber(cur) <= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
)lua";

const char* const kHint = "start redis-server or pass --redis";

// Records carry candidate sources and compiler output, which need not be valid UTF-8; replace
// bad bytes rather than throw.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

bool parse_int(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string reply_text(const redisReply* r) { return std::string(r->str, r->len); }

// Error replies that mean "Redis is there but cannot serve now"; everything else is a bug.
bool is_transient_error(const std::string& e) {
  for (const char* prefix : {"LOADING", "BUSY", "MASTERDOWN", "READONLY", "OOM", "TRYAGAIN"})
    if (e.rfind(prefix, 0) == 0) return true;
  return false;
}

Status error_reply_status(const std::string& what, const std::string& e) {
  std::string m = "Redis refused " + what + ": " + e;
  return is_transient_error(e) ? Status::unavailable(m + "; retry later") : Status::internal(m);
}

template <typename T>
Result<T> parse_record(const std::string& key, const std::string& field, const std::string& text) {
  try {
    return json::parse(text).get<T>();
  } catch (const std::exception& e) {
    return Status::internal("record " + key + "[" + field + "] is not valid: " + e.what() +
                            "; inspect it with redis-cli HGET " + key + " " + field);
  }
}

}  // namespace

Result<RedisEndpoint> parse_redis_url(const std::string& url) {
  const auto bad = [&url](const std::string& why) {
    return Status::invalid("Redis URL '" + url + "' " + why +
                           "; expected redis://host[:port][/db] or unix:///path/to.sock[?db=N]");
  };
  RedisEndpoint ep;
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kTcp = "redis://";
  std::string_view u = url;
  if (u.rfind(kUnix, 0) == 0) {
    ep.is_unix = true;
    std::string_view rest = u.substr(kUnix.size());
    if (auto q = rest.find('?'); q != std::string_view::npos) {
      std::string_view query = rest.substr(q + 1);
      rest = rest.substr(0, q);
      if (query.rfind("db=", 0) != 0 || !parse_int(query.substr(3), &ep.db) || ep.db < 0)
        return bad("has a query other than ?db=<number>");
    }
    if (rest.empty() || rest.front() != '/') return bad("needs an absolute socket path");
    ep.path = std::string(rest);
    return ep;
  }
  if (u.rfind(kTcp, 0) != 0) return bad("has an unknown scheme");
  std::string_view rest = u.substr(kTcp.size());
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty() && (!parse_int(db, &ep.db) || ep.db < 0)) return bad("has a database that is not a number");
  }
  if (rest.find('@') != std::string_view::npos) return bad("carries credentials, which are not supported");
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (!parse_int(rest.substr(colon + 1), &ep.port) || ep.port <= 0 || ep.port > 65535)
      return bad("has a port that is not a number in 1..65535");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return bad("has no host");
  ep.host = std::string(rest);
  return ep;
}

void RedisStore::ContextFree::operator()(redisContext* c) const {
  if (c) redisFree(c);
}
void RedisStore::ReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

RedisStore::RedisStore(std::string url, RedisEndpoint endpoint, std::chrono::milliseconds timeout, std::string prefix)
    : url_(std::move(url)), endpoint_(std::move(endpoint)), timeout_(timeout), prefix_(std::move(prefix)) {}

RedisStore::~RedisStore() = default;

Result<std::unique_ptr<RedisStore>> RedisStore::connect(const std::string& url, std::chrono::milliseconds timeout,
                                                        std::string prefix) {
  auto ep = parse_redis_url(url);
  if (!ep.ok()) return ep.status();
  std::unique_ptr<RedisStore> store(new RedisStore(url, *ep, timeout, std::move(prefix)));
  if (auto s = store->open(); !s.ok()) return s;
  return store;
}

Status RedisStore::unavailable(const std::string& what) const {
  return Status::unavailable("cannot reach Redis at " + url_ + ": " + what + "; " + kHint);
}

Status RedisStore::open() {
  SigpipeBlock no_sigpipe;
  ctx_.reset();
  const timeval tv = to_timeval(timeout_);
  std::unique_ptr<redisContext, ContextFree> c(
      endpoint_.is_unix ? redisConnectUnixWithTimeout(endpoint_.path.c_str(), tv)
                        : redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv));
  if (!c) return unavailable("out of memory allocating a connection");
  if (c->err) return unavailable(c->errstr);
  if (redisSetTimeout(c.get(), tv) != REDIS_OK) return unavailable(c->errstr);

  const auto call = [&c](const Command& cmd) -> Result<ReplyPtr> {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    ReplyPtr r(
        static_cast<redisReply*>(redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) return Status::unavailable(c->errstr);
    return r;
  };
  const auto check = [this](Result<ReplyPtr>& r, const std::string& what) -> Status {
    if (!r.ok()) return unavailable(r.status().message());
    if ((*r)->type == REDIS_REPLY_ERROR) {
      const std::string e = reply_text(r->get());
      if (is_transient_error(e)) return unavailable(e);
      return Status::internal("Redis at " + url_ + " refused " + what + ": " + e);
    }
    return {};
  };

  auto pong = call({"PING"});
  if (auto s = check(pong, "PING"); !s.ok()) return s;
  if (endpoint_.db != 0) {
    auto sel = call({"SELECT", std::to_string(endpoint_.db)});
    if (auto s = check(sel, "SELECT " + std::to_string(endpoint_.db)); !s.ok()) return s;
  }
  auto sha = call({"SCRIPT", "LOAD", kPutResultScript});
  if (auto s = check(sha, "SCRIPT LOAD"); !s.ok()) return s;
  put_result_sha_ = reply_text(sha->get());
  auto best_sha = call({"SCRIPT", "LOAD", kPutBestScript});
  if (auto s = check(best_sha, "SCRIPT LOAD"); !s.ok()) return s;
  put_best_sha_ = reply_text(best_sha->get());
  ctx_ = std::move(c);
  return {};
}

Result<std::vector<RedisStore::ReplyPtr>> RedisStore::exec(const std::vector<Command>& commands) {
  SigpipeBlock no_sigpipe;
  std::string first_error;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!ctx_) {
      if (auto s = open(); !s.ok()) {
        if (first_error.empty()) return s;
        return Status::unavailable("lost the connection to Redis at " + url_ + " (" + first_error +
                                   ") and could not reconnect: " + s.message());
      }
    }
    bool sent = true;
    for (const auto& cmd : commands) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& a : cmd) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
        sent = false;
        break;
      }
    }
    std::vector<ReplyPtr> replies;
    if (sent) {
      for (size_t i = 0; i < commands.size(); ++i) {
        void* r = nullptr;
        if (redisGetReply(ctx_.get(), &r) != REDIS_OK || !r) break;
        replies.emplace_back(static_cast<redisReply*>(r));
      }
    }
    if (replies.size() == commands.size()) return replies;
    // The connection is unusable once hiredis reports an error; drop it and try once more.
    std::string err = ctx_->err ? ctx_->errstr : "connection closed";
    if (err.empty()) err = "connection closed";
    ctx_.reset();
    if (!first_error.empty()) return unavailable(err + " again after reconnecting");
    first_error = err;
  }
  return unavailable(first_error);  // not reached
}

Result<RedisStore::ReplyPtr> RedisStore::exec_one(const Command& command) {
  auto replies = exec({command});
  if (!replies.ok()) return replies.status();
  ReplyPtr r = std::move(replies->front());
  if (r->type == REDIS_REPLY_ERROR) return error_reply_status(command.front(), reply_text(r.get()));
  return r;
}

Status RedisStore::put_campaign(const CampaignRecord& c) {
  auto r = exec_one({"HSET", campaigns_key(), c.campaign_id, dump(json(c))});
  return r.ok() ? Status() : r.status();
}

Status RedisStore::put_jobs(const std::vector<JobRecord>& jobs) {
  if (jobs.empty()) return {};
  std::vector<Command> commands;
  for (size_t i = 0; i < jobs.size(); i += kJobsPerCommand) {
    Command cmd{"HSET", jobs_key()};
    for (size_t k = i; k < std::min(jobs.size(), i + kJobsPerCommand); ++k) {
      cmd.push_back(jobs[k].spec.job_id);
      cmd.push_back(dump(json(jobs[k])));
    }
    commands.push_back(std::move(cmd));
  }
  auto replies = exec(commands);
  if (!replies.ok()) return replies.status();
  for (const auto& r : *replies)
    if (r->type == REDIS_REPLY_ERROR) return error_reply_status("HSET " + jobs_key(), reply_text(r.get()));
  return {};
}

Status RedisStore::put_sources(const std::map<std::string, std::string>& sources) {
  if (sources.empty()) return {};
  // One HSETNX per source: a command carries at most one source (4 MiB), and a source already
  // there is not sent again by the coordinator, which keeps the table in memory.
  std::vector<Command> commands;
  for (const auto& [hash, text] : sources) commands.push_back({"HSETNX", sources_key(), hash, text});
  auto replies = exec(commands);
  if (!replies.ok()) return replies.status();
  for (const auto& r : *replies)
    if (r->type == REDIS_REPLY_ERROR) return error_reply_status("HSETNX " + sources_key(), reply_text(r.get()));
  return {};
}

Result<RedisStore::ReplyPtr> RedisStore::eval(const std::string& sha, const char* script, const Command& keys_and_args,
                                              int key_count, const std::string& what) {
  const auto call = [&](const char* verb, const std::string& body) {
    Command cmd{verb, body, std::to_string(key_count)};
    cmd.insert(cmd.end(), keys_and_args.begin(), keys_and_args.end());
    return cmd;
  };
  auto replies = exec({call("EVALSHA", sha)});
  if (!replies.ok()) return replies.status();
  ReplyPtr r = std::move(replies->front());
  if (r->type == REDIS_REPLY_ERROR && reply_text(r.get()).rfind("NOSCRIPT", 0) == 0) {
    // The script cache was flushed between our SCRIPT LOAD and now; EVAL sends the text and
    // caches it again.
    auto again = exec({call("EVAL", script)});
    if (!again.ok()) return again.status();
    r = std::move(again->front());
  }
  if (r->type == REDIS_REPLY_ERROR) return error_reply_status(what, reply_text(r.get()));
  if (r->type != REDIS_REPLY_INTEGER)
    return Status::internal(what + " returned reply type " + std::to_string(r->type) + "; expected an integer");
  return r;
}

Status RedisStore::put_result(const ResultRecord& result, const JobRecord& job, bool* inserted) {
  if (result.job_id != job.spec.job_id)
    return Status::invalid("put_result got result for job '" + result.job_id + "' with the record of job '" +
                           job.spec.job_id + "'; pass the record of the same job");
  auto r = eval(put_result_sha_, kPutResultScript,
                {results_key(), results_order_key(), jobs_key(), result.job_id, dump(json(result)), dump(json(job))}, 3,
                "the put_result script");
  if (!r.ok()) return r.status();
  *inserted = (*r)->integer == 1;
  return {};
}

Status RedisStore::put_best(const TunedEntry& entry, bool* stored) {
  if (!(entry.m.latency_us > 0))
    return Status::invalid("put_best got entry " + tuning_key(entry) + " without a positive latency_us");
  char latency[40];
  std::snprintf(latency, sizeof latency, "%.17g", entry.m.latency_us);
  auto r =
      eval(put_best_sha_, kPutBestScript,
           {best_key(), best_latency_key(), tuning_key(entry), dump(json(entry)), latency}, 2, "the put_best script");
  if (!r.ok()) return r.status();
  *stored = (*r)->integer == 1;
  return {};
}

Result<std::vector<TunedEntry>> RedisStore::load_best() {
  auto r = exec_one({"HGETALL", best_key()});
  if (!r.ok()) return r.status();
  std::vector<std::pair<std::string, TunedEntry>> keyed;
  const redisReply* h = r->get();
  for (size_t i = 0; i + 1 < h->elements; i += 2) {
    auto e = parse_record<TunedEntry>(best_key(), reply_text(h->element[i]), reply_text(h->element[i + 1]));
    if (!e.ok()) return e.status();
    keyed.emplace_back(reply_text(h->element[i]), std::move(*e));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<TunedEntry> out;
  for (auto& [k, e] : keyed) out.push_back(std::move(e));
  return out;
}

Result<StoreSnapshot> RedisStore::load() {
  auto replies = exec({{"HGETALL", campaigns_key()},
                       {"HGETALL", jobs_key()},
                       {"HGETALL", results_key()},
                       {"LRANGE", results_order_key(), "0", "-1"},
                       {"HGETALL", sources_key()}});
  if (!replies.ok()) return replies.status();
  for (const auto& r : *replies)
    if (r->type == REDIS_REPLY_ERROR) return error_reply_status("load", reply_text(r.get()));
  const auto& rs = *replies;

  StoreSnapshot snap;
  const redisReply* campaigns = rs[0].get();
  for (size_t i = 0; i + 1 < campaigns->elements; i += 2) {
    auto c = parse_record<CampaignRecord>(campaigns_key(), reply_text(campaigns->element[i]),
                                          reply_text(campaigns->element[i + 1]));
    if (!c.ok()) return c.status();
    snap.campaigns.push_back(std::move(*c));
  }
  std::sort(snap.campaigns.begin(), snap.campaigns.end(),
            [](const auto& a, const auto& b) { return a.campaign_id < b.campaign_id; });

  const redisReply* jobs = rs[1].get();
  for (size_t i = 0; i + 1 < jobs->elements; i += 2) {
    auto j = parse_record<JobRecord>(jobs_key(), reply_text(jobs->element[i]), reply_text(jobs->element[i + 1]));
    if (!j.ok()) return j.status();
    snap.jobs.push_back(std::move(*j));
  }
  std::sort(snap.jobs.begin(), snap.jobs.end(), [](const auto& a, const auto& b) {
    return std::tie(a.submitted_wall_ms, a.spec.job_id) < std::tie(b.submitted_wall_ms, b.spec.job_id);
  });

  std::map<std::string, std::string> result_text;
  const redisReply* results = rs[2].get();
  for (size_t i = 0; i + 1 < results->elements; i += 2)
    result_text.emplace(reply_text(results->element[i]), reply_text(results->element[i + 1]));
  const redisReply* order = rs[3].get();
  for (size_t i = 0; i < order->elements; ++i) {
    auto it = result_text.find(reply_text(order->element[i]));
    if (it == result_text.end()) continue;  // a duplicate or dangling id; the hash is the record
    auto r = parse_record<ResultRecord>(results_key(), it->first, it->second);
    if (!r.ok()) return r.status();
    snap.results.push_back(std::move(*r));
    result_text.erase(it);
  }
  // Rows missing from the order list (written by hand or by an older tool) come last, by job_id.
  for (const auto& [id, text] : result_text) {
    auto r = parse_record<ResultRecord>(results_key(), id, text);
    if (!r.ok()) return r.status();
    snap.results.push_back(std::move(*r));
  }
  const redisReply* sources = rs[4].get();
  for (size_t i = 0; i + 1 < sources->elements; i += 2)
    snap.sources.emplace(reply_text(sources->element[i]), reply_text(sources->element[i + 1]));
  return snap;
}

Result<int64_t> RedisStore::result_count() {
  auto r = exec_one({"HLEN", results_key()});
  if (!r.ok()) return r.status();
  return static_cast<int64_t>((*r)->integer);
}

}  // namespace ak
