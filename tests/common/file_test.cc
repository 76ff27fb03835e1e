// common/file.h: whole-file reads and atomic replacement.
#include "common/file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ak {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ak-file-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(FileTest, ReadFileReturnsEveryByteIncludingNulls) {
  const std::string data("a\0b\nc", 5);
  std::ofstream(dir_ / "f", std::ios::binary) << data;
  auto got = read_file((dir_ / "f").string());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, data);
}

TEST_F(FileTest, ReadingAMissingFileIsNotFound) {
  auto got = read_file((dir_ / "missing").string());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
}

TEST_F(FileTest, ReadTailGivesTheLastBytesOrAllOfAShortFileAndNothingForAMissingOne) {
  std::ofstream(dir_ / "log", std::ios::binary) << "first line\nsecond line\n";
  EXPECT_EQ(read_tail((dir_ / "log").string(), 12), "second line\n");
  EXPECT_EQ(read_tail((dir_ / "log").string(), 1000), "first line\nsecond line\n");
  EXPECT_EQ(read_tail((dir_ / "missing").string(), 10), "");
}

TEST_F(FileTest, WriteFileAtomicallyReplacesTheContentAndLeavesNoTemporary) {
  const std::string path = (dir_ / "cache.bin").string();
  ASSERT_TRUE(write_file_atomically(path, "old content, longer").ok());
  ASSERT_TRUE(write_file_atomically(path, "new").ok());
  auto got = read_file(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "new");
  EXPECT_EQ(entries(), 1u) << "a temporary was left beside the file";
}

TEST_F(FileTest, WriteFileAtomicallyIntoAMissingDirectoryFailsNamingThePath) {
  const std::string path = (dir_ / "none" / "f").string();
  Status s = write_file_atomically(path, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ(entries(), 0u);
}

TEST_F(FileTest, WriteFileTruncatesWhatWasThere) {
  const std::string path = (dir_ / "f").string();
  ASSERT_TRUE(write_file(path, "a longer first text").ok());
  ASSERT_TRUE(write_file(path, "short").ok());
  EXPECT_EQ(read_file(path).value(), "short");
}

// A confined step can write in the folders the worker later writes requests into: a symbolic link
// it planted at the file's name, or at the name of the temporary (".<name>.tmp-<pid>-<n>", easy to
// guess), must never make the worker write through it into the link's target.
TEST_F(FileTest, ALinkPlantedAtTheFileOrAtItsTemporaryIsNeverWrittenThrough) {
  const fs::path target = dir_ / "the-workers-file";
  std::ofstream(target) << "untouched";
  const fs::path path = dir_ / "step.request.json";
  fs::create_symlink(target, path);
  EXPECT_FALSE(write_file(path.string(), "planted").ok());
  EXPECT_EQ(read_file(target.string()).value(), "untouched");

  const fs::path fifo = dir_ / "step.fifo";  // a pipe nobody reads would block the write forever
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(write_file(fifo.string(), "planted").ok());

  for (int n = 0; n < 64; ++n)  // the counter's next values in this process
    fs::create_symlink(target, dir_ / (".step.request.json.tmp-" + std::to_string(getpid()) + "-" + std::to_string(n)));
  ASSERT_TRUE(write_file_atomically(path.string(), "the request").ok());
  EXPECT_EQ(read_file(target.string()).value(), "untouched");
  EXPECT_FALSE(fs::is_symlink(path)) << "the link itself is replaced";
  EXPECT_EQ(read_file(path.string()).value(), "the request");
}

}  // namespace
}  // namespace ak
