// coordinator/auth.h: key files, allow-lists, the loopback rule and the refusal log. The ZAP
// handler itself is exercised against a real coordinator in tests/integration/auth_test.cc.
#include "coordinator/auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace ak {
namespace {

class AuthFilesTest : public ::testing::Test {
 protected:
  AuthFilesTest() {
    char tmpl[] = "/tmp/ak-auth-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~AuthFilesTest() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir;
};

TEST_F(AuthFilesTest, GeneratedKeyFilesReadBackAsTheSamePairAndTheSecretIsPrivate) {
  auto keys = generate_curve_keypair();
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  ASSERT_TRUE(write_key_files(dir, "alice", *keys).ok());
  struct stat st {};
  ASSERT_EQ(stat((dir + "/alice.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = read_secret_key_file(dir + "/alice.key");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->secret_z85, keys->secret_z85);
  EXPECT_EQ(back->public_z85, keys->public_z85) << "derived from the secret";
  auto pub = read_public_key_file(dir + "/alice.pub");
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  EXPECT_EQ(*pub, keys->public_z85);
  EXPECT_EQ(write_key_files(dir, "alice", *keys).code(), StatusCode::kAlreadyExists) << "never overwritten";
}

TEST_F(AuthFilesTest, ASecretKeyFileOthersMayReadIsRefused) {
  auto keys = generate_curve_keypair();
  ASSERT_TRUE(keys.ok());
  ASSERT_TRUE(write_key_files(dir, "k", *keys).ok());
  chmod((dir + "/k.key").c_str(), 0644);
  auto r = read_secret_key_file(dir + "/k.key");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chmod 600"), std::string::npos) << r.status().message();
}

TEST_F(AuthFilesTest, AnAllowListTakesRolesCommentsAndKeysThatContainAHash) {
  // '#' is a Z85 character: find a key with one.
  std::string hashed;
  for (int i = 0; i < 500 && hashed.empty(); ++i) {
    auto k = generate_curve_keypair();
    ASSERT_TRUE(k.ok());
    if (k->public_z85.find('#') != std::string::npos) hashed = k->public_z85;
  }
  ASSERT_FALSE(hashed.empty());
  auto a = generate_curve_keypair();
  auto b = generate_curve_keypair();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string path = write("clients.allow", "# the clients\n\n" + a->public_z85 + "\n" + b->public_z85 +
                                                      "   admin   # root\n" + hashed + " # hash inside\n");
  auto list = load_allow_list(path, true);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->keys.size(), 3u);
  EXPECT_EQ(list->keys.at(a->public_z85), ClientRole::kSubmit);
  EXPECT_EQ(list->keys.at(b->public_z85), ClientRole::kAdmin);
  EXPECT_EQ(list->keys.at(hashed), ClientRole::kSubmit);
}

TEST_F(AuthFilesTest, AnAllowListRefusesBadKeysUnknownRolesAndRolesForWorkers) {
  auto k = generate_curve_keypair();
  ASSERT_TRUE(k.ok());
  auto bad_key = load_allow_list(write("a", "not-a-key\n"), true);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find(":1:"), std::string::npos) << bad_key.status().message();
  EXPECT_FALSE(load_allow_list(write("b", k->public_z85 + " root\n"), true).ok());
  EXPECT_FALSE(load_allow_list(write("c", k->public_z85 + " admin\n"), false).ok()) << "workers have no role";
  EXPECT_TRUE(load_allow_list(write("d", k->public_z85 + " # worker-gpu01\n"), false).ok());
  EXPECT_TRUE(load_allow_list(write("e", ""), false)->keys.empty()) << "an empty list admits nobody";
}

TEST(LoopbackTest, OnlyAddressesThisHostAloneCanReachAreLoopback) {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.9.9.9:1", "tcp://localhost:5555",
                         "tcp://[::1]:5555", "ipc:///tmp/ak.sock", "inproc://x"})
    EXPECT_TRUE(is_loopback_endpoint(ep)) << ep;
  for (const char* ep : {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://10.0.0.5:5555", "tcp://gpu01:5555",
                         "tcp://[::]:5555", "tcp://eth0:5555", "udp://127.0.0.1:1"})
    EXPECT_FALSE(is_loopback_endpoint(ep)) << ep;
  EXPECT_TRUE(is_loopback_address("127.0.0.1:9464"));
  EXPECT_TRUE(is_loopback_address("localhost:0"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0:9464"));
  EXPECT_FALSE(is_loopback_address(":9464"));
}

TEST(RefusalLogTest, APeerIsLoggedOncePerIntervalWhateverItSends) {
  RefusalLog log(10'000);
  int64_t now = 1'000'000;
  EXPECT_TRUE(log.refused("10.0.0.9", "unknown_key", "handshake refused", now));
  for (int i = 0; i < 10'000; ++i) EXPECT_FALSE(log.refused("10.0.0.9", "unknown_key", "again", now + i % 9'999));
  EXPECT_TRUE(log.refused("10.0.0.10", "unknown_key", "another peer", now)) << "each peer has its own line";
  EXPECT_TRUE(log.refused("10.0.0.9", "not_leased", "the next interval", now + 10'000));
  EXPECT_FALSE(log.refused("10.0.0.9", "not_leased", "", now + 10'001));
}

TEST(RefusalLogTest, ManyPeersDoNotGrowItWithoutBound) {
  RefusalLog log(1'000);
  for (int i = 0; i < 20'000; ++i) log.refused("peer" + std::to_string(i), "unknown_key", "", int64_t(i) * 10);
  // Nothing to observe but that it stays usable; a peer seen an interval ago logs again.
  EXPECT_TRUE(log.refused("peer19999", "unknown_key", "", 200'000 + 1'000));
}

}  // namespace
}  // namespace ak
