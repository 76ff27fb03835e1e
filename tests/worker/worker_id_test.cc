#include "worker/worker_id.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ak {
namespace {

class WorkerIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ak-worker-id-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string locks() const { return dir_ + "/locks"; }
  std::string state() const { return dir_ + "/state"; }
  std::string dir_;
};

TEST_F(WorkerIdTest, AnInstanceIsKeptInTheStateFolderAndDiffersBetweenFoldersAndIds) {
  auto first = worker_instance(state(), "gpu01-cuda0");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->size(), 16u);
  EXPECT_EQ(*worker_instance(state(), "gpu01-cuda0"), *first) << "a restart is the same instance";
  EXPECT_NE(*worker_instance(dir_ + "/elsewhere", "gpu01-cuda0"), *first);
  EXPECT_NE(*worker_instance(state(), "gpu01-cuda1"), *first);
}

TEST_F(WorkerIdTest, WithoutAStateFolderEveryInstanceIsNew) {
  EXPECT_NE(*worker_instance("", "gpu01-cuda0"), *worker_instance("", "gpu01-cuda0"));
}

TEST_F(WorkerIdTest, ASecondClaimOfAHeldIdFailsNamingTheHolder) {
  auto first = WorkerIdClaim::claim(locks(), "gpu01-cuda0");
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = WorkerIdClaim::claim(locks(), "gpu01-cuda0");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(
      second.status().message().find("in use by another live worker on this host (pid " + std::to_string(getpid())),
      std::string::npos)
      << second.status().message();
}

TEST_F(WorkerIdTest, DefaultIdsOfLiveWorkersDifferAndAReleasedIdIsTakenAgain) {
  auto a = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  auto b = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  auto c = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->id(), "host-cpu0");
  EXPECT_EQ(b->id(), "host-cpu0-2");
  EXPECT_EQ(c->id(), "host-cpu0-3");
  *b = WorkerIdClaim();  // that worker ends
  auto d = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->id(), "host-cpu0-2");
}

TEST_F(WorkerIdTest, ARestartedWorkerTakesTheIdWhoseOutboxHoldsResults) {
  std::filesystem::create_directories(state());
  std::ofstream(outbox_path(state(), "host-cpu0-3")) << "{\"result\":1}\n";
  std::ofstream(outbox_path(state(), "host-cpu0")) << "";  // empty: nothing waiting
  auto a = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->id(), "host-cpu0-3");
  auto b = WorkerIdClaim::claim_first_free(locks(), "host-cpu0", state());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id(), "host-cpu0");
}

TEST_F(WorkerIdTest, AKilledHoldersIdIsFreeAtOnce) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto claim = WorkerIdClaim::claim(locks(), "host-cuda0");
    char c = claim.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_EQ(c, 'y');
  auto held = WorkerIdClaim::claim(locks(), "host-cuda0");
  EXPECT_FALSE(held.ok());
  EXPECT_NE(held.status().message().find("pid " + std::to_string(child)), std::string::npos) << held.status().message();
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  auto mine = WorkerIdClaim::claim(locks(), "host-cuda0");
  EXPECT_TRUE(mine.ok()) << mine.status().message();
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

// The lock folder may be shared by every user of the host: a lock planted as a symlink by another
// user is refused, and what it points to is left as it was (a root worker would truncate it).
TEST(WorkerIdLock, ALockThatIsASymlinkIsRefusedAndItsTargetLeftAlone) {
  char tmpl[] = "/tmp/ak-worker-id-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::filesystem::create_directories(dir + "/locks");
  std::ofstream(dir + "/precious") << "keep me\n";
  std::filesystem::create_symlink(dir + "/precious", dir + "/locks/host-cpu0.lock");
  auto claim = WorkerIdClaim::claim(dir + "/locks", "host-cpu0");
  EXPECT_FALSE(claim.ok());
  std::ifstream in(dir + "/precious");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "keep me");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ak
