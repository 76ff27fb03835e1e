// RedisStore and RedisServer against a real redis-server, one private server per test in a fresh
// temporary directory (unix socket only, so no ports are shared between tests).
#include "coordinator/store/redis_store.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "coordinator/store/redis_server.h"
#include "tests/coordinator/store/store_contract.h"

namespace ak {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::as_json;
using testing::sample_campaign;
using testing::sample_job;
using testing::sample_result;

constexpr auto kTimeout = 5000ms;

// A fresh directory under /tmp (short, so the socket path fits sun_path), removed afterwards.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ak-redis-XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<RedisServer> start_server(const std::string& dir) {
  auto server = RedisServer::start({.data_dir = dir});
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<RedisStore> connect_store(const std::string& url, std::string prefix = RedisStore::kDefaultPrefix) {
  auto store = RedisStore::connect(url, kTimeout, std::move(prefix));
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return store.ok() ? std::move(store).value() : nullptr;
}

// A raw connection for checking what is in Redis, independent of RedisStore.
class RawRedis {
 public:
  explicit RawRedis(const std::string& socket_path) : c_(redisConnectUnix(socket_path.c_str())) {}
  ~RawRedis() { redisFree(c_); }
  redisReply* cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (last_) freeReplyObject(last_);
    last_ = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    return last_;
  }
  long long integer(const std::vector<std::string>& args) {
    redisReply* r = cmd(args);
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  }
  std::string string(const std::vector<std::string>& args) {
    redisReply* r = cmd(args);
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
  }

 private:
  redisContext* c_;
  redisReply* last_ = nullptr;
};

struct RedisStoreEnv {
  void SetUp() {
    server = start_server(dir.path());
    ASSERT_TRUE(server);
    s = connect_store(server->url());
    ASSERT_TRUE(s);
  }
  void TearDown() {
    s.reset();
    server.reset();
  }
  Store& store() { return *s; }
  TempDir dir;
  std::unique_ptr<RedisServer> server;
  std::unique_ptr<RedisStore> s;
};

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Redis, StoreContract, ::testing::Types<RedisStoreEnv>);
}

namespace {

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = start_server(dir_.path());
    ASSERT_TRUE(server_);
    store_ = connect_store(server_->url());
    ASSERT_TRUE(store_);
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisStore> store_;
};

TEST_F(RedisStoreTest, RecordsAreStoredUnderTheDocumentedKeys) {
  bool inserted = false;
  ASSERT_TRUE(store_->put_campaign(sample_campaign("camp-1")).ok());
  ASSERT_TRUE(store_->put_jobs({sample_job("job-2")}).ok());
  ASSERT_TRUE(store_->put_result(sample_result("job-1"), sample_job("job-1"), &inserted).ok());
  RawRedis raw(server_->socket_path());
  EXPECT_EQ(json::parse(raw.string({"HGET", "ak:campaigns", "camp-1"})), as_json(sample_campaign("camp-1")));
  EXPECT_EQ(json::parse(raw.string({"HGET", "ak:jobs", "job-2"})), as_json(sample_job("job-2")));
  EXPECT_EQ(json::parse(raw.string({"HGET", "ak:jobs", "job-1"})), as_json(sample_job("job-1")));
  EXPECT_EQ(json::parse(raw.string({"HGET", "ak:results", "job-1"})), as_json(sample_result("job-1")));
  EXPECT_EQ(raw.string({"LINDEX", "ak:results:order", "0"}), "job-1");
}

TEST_F(RedisStoreTest, StoresWithDifferentPrefixesDoNotSeeEachOther) {
  auto other = connect_store(server_->url(), "farm2:");
  ASSERT_TRUE(other);
  bool inserted = false;
  ASSERT_TRUE(other->put_result(sample_result("job-1"), sample_job("job-1"), &inserted).ok());
  ASSERT_TRUE(store_->put_result(sample_result("job-1"), sample_job("job-1"), &inserted).ok());
  EXPECT_TRUE(inserted);
  EXPECT_EQ(other->results_key(), "farm2:results");
  RawRedis raw(server_->socket_path());
  EXPECT_EQ(raw.integer({"HLEN", "farm2:results"}), 1);
  EXPECT_EQ(raw.integer({"HLEN", "ak:results"}), 1);
}

TEST_F(RedisStoreTest, ConcurrentPutResultsFromManyConnectionsLeaveOneRowAndOneOrderEntryPerJob) {
  constexpr int kConnections = 4;
  constexpr int kJobs = 200;
  std::vector<int> inserted_by(kConnections, 0);
  // A connection that fails to connect or to write fails the test: the race needs all of them.
  std::vector<std::string> errors(kConnections);
  std::vector<std::thread> threads;
  for (int t = 0; t < kConnections; ++t) {
    threads.emplace_back([&, t] {
      auto store = RedisStore::connect(server_->url(), kTimeout);
      if (!store.ok()) {
        errors[t] = "connect: " + store.status().to_string();
        return;
      }
      for (int i = 0; i < kJobs; ++i) {
        const std::string id = "job-" + std::to_string(i);
        bool inserted = false;
        Status s = (*store)->put_result(sample_result(id, t + 1), sample_job(id), &inserted);
        if (!s.ok()) {
          errors[t] = "put_result(" + id + "): " + s.to_string();
          return;
        }
        if (inserted) ++inserted_by[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kConnections; ++t) EXPECT_EQ(errors[t], "") << "connection " << t;
  int total = 0;
  for (int n : inserted_by) total += n;
  EXPECT_EQ(total, kJobs) << "each job must be inserted by exactly one connection";
  RawRedis raw(server_->socket_path());
  EXPECT_EQ(raw.integer({"HLEN", "ak:results"}), kJobs);
  EXPECT_EQ(raw.integer({"LLEN", "ak:results:order"}), kJobs);
  auto snap = store_->load();
  ASSERT_TRUE(snap.ok());
  std::set<std::string> ids;
  for (const auto& r : snap->results) ids.insert(r.job_id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kJobs));
}

TEST_F(RedisStoreTest, AResultRowThatDoesNotParseFailsLoadNamingItsKey) {
  RawRedis raw(server_->socket_path());
  raw.cmd({"HSET", "ak:results", "job-x", "{not json"});
  raw.cmd({"RPUSH", "ak:results:order", "job-x"});
  auto snap = store_->load();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kInternal);
  EXPECT_NE(snap.status().message().find("ak:results[job-x]"), std::string::npos) << snap.status().message();
}

TEST_F(RedisStoreTest, SourcesWithInvalidUtf8AreStoredAndLoaded) {
  JobRecord job = sample_job("job-1");
  job.spec.source = "// \xff\xfe bytes from a bad editor\n";
  ASSERT_TRUE(store_->put_jobs({job}).ok());
  auto snap = store_->load();
  ASSERT_TRUE(snap.ok()) << snap.status().to_string();
  ASSERT_EQ(snap->jobs.size(), 1u);
}

TEST_F(RedisStoreTest, PutResultRejectsAJobRecordOfAnotherJob) {
  bool inserted = false;
  Status s = store_->put_result(sample_result("job-1"), sample_job("job-2"), &inserted);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisStoreTest, AcknowledgedDataSurvivesKill9AndRestartThroughTheAof) {
  bool inserted = false;
  ASSERT_TRUE(store_->put_campaign(sample_campaign("camp-1")).ok());
  ASSERT_TRUE(store_->put_jobs({sample_job("job-1"), sample_job("job-2")}).ok());
  ASSERT_TRUE(store_->put_result(sample_result("job-2"), sample_job("job-2"), &inserted).ok());
  ASSERT_TRUE(store_->put_result(sample_result("job-1"), sample_job("job-1"), &inserted).ok());
  store_.reset();
  server_->kill9();
  ASSERT_FALSE(server_->running());
  ASSERT_TRUE(server_->restart().ok());

  auto store = connect_store(server_->url());
  ASSERT_TRUE(store);
  auto snap = store->load();
  ASSERT_TRUE(snap.ok()) << snap.status().to_string();
  EXPECT_EQ(snap->campaigns.size(), 1u);
  EXPECT_EQ(snap->jobs.size(), 2u);
  ASSERT_EQ(snap->results.size(), 2u);
  EXPECT_EQ(snap->results[0].job_id, "job-2");
  EXPECT_EQ(snap->results[1].job_id, "job-1");
  EXPECT_EQ(as_json(snap->results[1]), as_json(sample_result("job-1")));
}

TEST_F(RedisStoreTest, TheStoreReconnectsTransparentlyAfterTheServerRestarts) {
  ASSERT_TRUE(store_->put_campaign(sample_campaign("camp-1")).ok());
  server_->kill9();
  ASSERT_TRUE(server_->restart().ok());
  // Same store object: its connection died with the old server; the restart also emptied the
  // script cache that put_result relies on.
  bool inserted = false;
  Status s = store_->put_result(sample_result("job-1"), sample_job("job-1"), &inserted);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(inserted);
  auto snap = store_->load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->campaigns.size(), 1u);
  EXPECT_EQ(snap->results.size(), 1u);
}

TEST_F(RedisStoreTest, PutResultFallsBackToEvalWhenTheScriptCacheWasFlushed) {
  RawRedis raw(server_->socket_path());
  raw.cmd({"SCRIPT", "FLUSH"});
  bool inserted = false;
  Status s = store_->put_result(sample_result("job-1"), sample_job("job-1"), &inserted);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(inserted);
}

TEST_F(RedisStoreTest, CallsFailUnavailableWithTheUrlWhileTheServerIsDown) {
  ASSERT_TRUE(server_->stop().ok());
  auto n = store_->result_count();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(n.status().message().find(server_->url()), std::string::npos) << n.status().message();
  EXPECT_NE(n.status().message().find("start redis-server or pass --redis"), std::string::npos);
}

TEST_F(RedisStoreTest, TheStoreRecoversOnTheNextCallOnceTheServerIsBack) {
  ASSERT_TRUE(server_->stop().ok());
  ASSERT_FALSE(store_->result_count().ok());
  ASSERT_TRUE(server_->restart().ok());
  auto n = store_->result_count();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
}

TEST_F(RedisStoreTest, ADroppedConnectionIsReopenedWithinTheSameCall) {
  RawRedis raw(server_->socket_path());
  raw.cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  ASSERT_TRUE(store_->put_campaign(sample_campaign()).ok());
}

TEST(RedisStoreConnect, ADeadTcpUrlIsUnavailableWithAHelpfulMessage) {
  // A socket bound but not listening: connecting to its port is refused, and no other test can
  // take the port while we hold it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  auto store = RedisStore::connect(url, kTimeout);
  close(fd);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.status().message(),
            "cannot reach Redis at " + url + ": Connection refused; start redis-server or pass --redis");
}

TEST(RedisStoreConnect, AMissingUnixSocketIsUnavailable) {
  TempDir dir;
  auto store = RedisStore::connect("unix://" + dir.path() + "/none.sock", kTimeout);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(store.status().message().find("No such file or directory"), std::string::npos) << store.status().message();
}

TEST(RedisStoreConnect, AUrlWithAnUnknownSchemeIsAnInvalidArgument) {
  auto store = RedisStore::connect("http://127.0.0.1:6379", kTimeout);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("redis://host[:port][/db]"), std::string::npos);
}

TEST(RedisStoreConnect, ANonZeroDatabaseIsSelected) {
  TempDir dir;
  auto server = start_server(dir.path());
  ASSERT_TRUE(server);
  auto store = connect_store(server->url() + "?db=3");
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->put_campaign(sample_campaign()).ok());
  RawRedis raw(server->socket_path());
  EXPECT_EQ(raw.integer({"HLEN", "ak:campaigns"}), 0);
  raw.cmd({"SELECT", "3"});
  EXPECT_EQ(raw.integer({"HLEN", "ak:campaigns"}), 1);
}

TEST(RedisUrl, ATcpUrlGivesHostPortAndDatabase) {
  auto ep = parse_redis_url("redis://redis.farm:6380/2");
  ASSERT_TRUE(ep.ok());
  EXPECT_FALSE(ep->is_unix);
  EXPECT_EQ(ep->host, "redis.farm");
  EXPECT_EQ(ep->port, 6380);
  EXPECT_EQ(ep->db, 2);
}

TEST(RedisUrl, ATcpUrlWithoutPortUsesTheDefaultPortAndDatabase) {
  auto ep = parse_redis_url("redis://localhost");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->port, 6379);
  EXPECT_EQ(ep->db, 0);
}

TEST(RedisUrl, AUnixUrlGivesThePathAndDatabase) {
  auto ep = parse_redis_url("unix:///var/run/redis/redis.sock?db=4");
  ASSERT_TRUE(ep.ok());
  EXPECT_TRUE(ep->is_unix);
  EXPECT_EQ(ep->path, "/var/run/redis/redis.sock");
  EXPECT_EQ(ep->db, 4);
}

TEST(RedisUrl, MalformedUrlsAreInvalidArguments) {
  for (const char* url :
       {"", "localhost:6379", "redis://", "redis://host:0", "redis://host:99999", "redis://host:port", "redis://host/x",
        "redis://:secret@host", "unix://relative.sock", "unix:///a.sock?timeout=3"}) {
    auto ep = parse_redis_url(url);
    EXPECT_FALSE(ep.ok()) << url;
    if (!ep.ok()) {
      EXPECT_EQ(ep.status().code(), StatusCode::kInvalidArgument) << url;
    }
  }
}

TEST(RedisServer, TheUrlIsTheUnixSocketInTheDataDirectory) {
  TempDir dir;
  auto server = start_server(dir.path());
  ASSERT_TRUE(server);
  EXPECT_EQ(server->url(), "unix://" + dir.path() + "/redis.sock");
  EXPECT_TRUE(std::filesystem::exists(server->socket_path()));
}

TEST(RedisServer, TheServerRunsWithAnAofFsyncedOnEveryWrite) {
  TempDir dir;
  auto server = start_server(dir.path());
  ASSERT_TRUE(server);
  RawRedis raw(server->socket_path());
  redisReply* r = raw.cmd({"CONFIG", "GET", "appendfsync"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  EXPECT_EQ(std::string(r->element[1]->str), "always");
  r = raw.cmd({"CONFIG", "GET", "port"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  EXPECT_EQ(std::string(r->element[1]->str), "0");
}

TEST(RedisServer, StopEndsTheProcess) {
  TempDir dir;
  auto server = start_server(dir.path());
  ASSERT_TRUE(server);
  const pid_t pid = server->pid();
  ASSERT_TRUE(server->stop().ok());
  EXPECT_FALSE(server->running());
  EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " still exists";
}

// A server still on its way out on a data directory (its owner was killed; it exits on its death
// signal) is waited for before another starts there: Redis removes its socket file when it exits,
// which would take the new server's with it. One that stays is refused after stop_timeout.
TEST(RedisServer, ASecondServerOnADataDirectoryWaitsForTheFirstToExitAndRefusesOneThatStays) {
  TempDir dir;
  auto first = start_server(dir.path());
  ASSERT_TRUE(first);
  auto refused = RedisServer::start({.data_dir = dir.path(), .stop_timeout = std::chrono::milliseconds(300)});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("still runs on"), std::string::npos) << refused.status().message();
  EXPECT_TRUE(RawRedis(first->socket_path()).cmd({"PING"})) << "the first server keeps its socket";

  ASSERT_EQ(kill(first->pid(), SIGTERM), 0);  // on its way out, as after its owner's death
  auto second = RedisServer::start({.data_dir = dir.path()});
  ASSERT_TRUE(second.ok()) << second.status().message();
  RawRedis raw((*second)->socket_path());
  redisReply* r = raw.cmd({"PING"});
  ASSERT_TRUE(r) << "the second server's socket is still there";
  EXPECT_EQ(std::string(r->str), "PONG");
}

TEST(RedisServer, AMissingExecutableIsNotFound) {
  TempDir dir;
  auto server = RedisServer::start({.data_dir = dir.path(), .executable = "redis-server-that-does-not-exist"});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kNotFound);
  EXPECT_NE(server.status().message().find("redis-server-that-does-not-exist"), std::string::npos);
}

TEST(RedisServer, AServerThatExitsAtStartupIsReportedWithItsLog) {
  TempDir dir;
  // `false` exits at once with status 1, like a redis-server rejecting its configuration.
  auto server = RedisServer::start({.data_dir = dir.path(), .executable = "false"});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(server.status().message().find("exited with status 1"), std::string::npos) << server.status().message();
}

TEST(RedisServer, ADataDirectoryTooLongForAUnixSocketIsAnInvalidArgument) {
  TempDir dir;
  auto server = RedisServer::start({.data_dir = dir.path() + "/" + std::string(120, 'd')});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ak
