#include "cli/campaign_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/protocol.h"

namespace ak::cli {
namespace {

namespace fs = std::filesystem;

class CampaignFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ak-campaign-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
    fs::create_directories(root / "campaigns");
    fs::create_directories(root / "elsewhere");
    write(root / "elsewhere" / "secret.cc", "secret");
    write(root / "campaigns" / "kernel.cc", "// candidate");
    old_cwd = fs::current_path();
    fs::current_path(root / "elsewhere");
  }
  void TearDown() override {
    fs::current_path(old_cwd);
    fs::remove_all(root);
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  // A campaign file in campaigns/ naming `source_file`.
  std::string campaign(const std::string& source_file) {
    const fs::path p = root / "campaigns" / "c.json";
    write(p, nlohmann::json{{"kernel_type", "softmax"}, {"source_file", source_file}}.dump());
    return p.string();
  }
  fs::path root, old_cwd;
};

TEST_F(CampaignFileTest, ASourceBesideTheCampaignFileIsReadInline) {
  auto doc = load_campaign_file(campaign("kernel.cc"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["source"], "// candidate");
  EXPECT_FALSE(doc->contains("source_file"));
}

TEST_F(CampaignFileTest, AnAbsolutePathIsRefusedUnlessAllowed) {
  auto doc = load_campaign_file(campaign("/etc/passwd"));
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("absolute path"), std::string::npos) << doc.status().message();
  EXPECT_NE(doc.status().message().find("--allow-source-outside"), std::string::npos);
  EXPECT_TRUE(load_campaign_file(campaign((root / "elsewhere" / "secret.cc").string()), true).ok());
}

TEST_F(CampaignFileTest, DotDotIsRefused) {
  auto doc = load_campaign_file(campaign("../elsewhere/secret.cc"));
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("'..'"), std::string::npos) << doc.status().message();
}

TEST_F(CampaignFileTest, ASymlinkOutOfBothFoldersIsRefused) {
  fs::create_symlink("/etc/passwd", root / "campaigns" / "link.cc");
  auto doc = load_campaign_file(campaign("link.cc"));
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("outside the campaign file's folder and the current folder"), std::string::npos)
      << doc.status().message();
}

TEST_F(CampaignFileTest, ASymlinkIntoTheCurrentFolderIsAllowed) {
  // The current folder (elsewhere/) is one of the two allowed places.
  fs::create_symlink(root / "elsewhere" / "secret.cc", root / "campaigns" / "mine.cc");
  auto doc = load_campaign_file(campaign("mine.cc"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["source"], "secret");
}

TEST_F(CampaignFileTest, AFolderOrDeviceIsNotARegularFile) {
  fs::create_directories(root / "campaigns" / "dir");
  auto doc = load_campaign_file(campaign("dir"));
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("not a regular file"), std::string::npos) << doc.status().message();
  EXPECT_FALSE(load_campaign_file(campaign("/dev/zero"), true).ok());
}

TEST_F(CampaignFileTest, ASourceOverTheFrameLimitIsRefusedNamingTheLimit) {
  write(root / "campaigns" / "big.cc", std::string(protocol::kMaxFrameBytes + 1, 'x'));
  auto doc = load_campaign_file(campaign("big.cc"));
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("at most " + std::to_string(protocol::kMaxFrameBytes) + " bytes"),
            std::string::npos)
      << doc.status().message();
}

TEST_F(CampaignFileTest, DeeplyNestedJsonIsRefusedBeforeParsing) {
  const fs::path p = root / "campaigns" / "deep.json";
  write(p, "{\"a\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}");
  auto doc = load_campaign_file(p.string());
  ASSERT_FALSE(doc.ok());
  EXPECT_NE(doc.status().message().find("nested deeper than 64 levels"), std::string::npos) << doc.status().message();
}

}  // namespace
}  // namespace ak::cli
