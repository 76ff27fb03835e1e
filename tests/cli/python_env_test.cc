// Which Python a worker runs and where its torch is (cli/python_env.h), with real Pythons: the
// configured one (AK_PYTHON, with torch) and a script that stands for a Python without torch.
#include "cli/python_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ak::cli {
namespace {

namespace fs = std::filesystem;

TEST(ChoosePython, TheFlagWinsThenTheEnvironmentThenTheBuildsDefaultThenPath) {
  EXPECT_EQ(choose_python("/f/python", "/e/python", AK_PYTHON).source, "--python");
  EXPECT_EQ(choose_python("/f/python", "/e/python", AK_PYTHON).path, "/f/python");
  EXPECT_EQ(choose_python("", "/e/python", AK_PYTHON).source, "AK_PYTHON");
  EXPECT_EQ(choose_python("", "", AK_PYTHON).path, AK_PYTHON);
  EXPECT_EQ(choose_python("", "", AK_PYTHON).source, "the build's default");
}

TEST(ChoosePython, ABuildDefaultThatIsGoneFallsBackToPython3OnPath) {
  const PythonChoice c = choose_python("", "", "/no/such/venv/bin/python");
  EXPECT_EQ(c.source, "PATH");
  EXPECT_NE(c.path.find("python3"), std::string::npos) << c.path;
}

TEST(LocateTorch, FindsTheLibFolderAndVersionOfTheConfiguredPython) {
  auto t = locate_torch(AK_PYTHON);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(fs::exists(fs::path(t->lib_dir) / "libtorch_cpu.so")) << t->lib_dir;
  EXPECT_FALSE(t->version.empty());
}

TEST(SandboxEnvironment, APythonWithoutTorchIsNamedWithHowItWasChosenAndSetsNothing) {
  const fs::path dir = fs::temp_directory_path() / ("python_env_test-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // A "Python" that answers as one without torch would.
  const fs::path fake = dir / "python";
  std::ofstream(fake) << "#!/bin/sh\necho 'TORCH '\n";
  fs::permissions(fake, fs::perms::owner_all);
  const SandboxEnvironment e = sandbox_environment({fake.string(), "AK_PYTHON"}, "2.11.0", "");
  EXPECT_TRUE(e.warning);
  EXPECT_TRUE(e.env.empty());
  EXPECT_NE(e.message.find(fake.string() + " (from AK_PYTHON)"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("has no torch"), std::string::npos) << e.message;
  fs::remove_all(dir);
}

TEST(SandboxEnvironment, TheConfiguredPythonPutsItsTorchFirstOnTheLibraryPath) {
  auto t = locate_torch(AK_PYTHON);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const SandboxEnvironment e = sandbox_environment({AK_PYTHON, "--python"}, "", "/opt/x");
  EXPECT_FALSE(e.warning) << e.message;
  ASSERT_EQ(e.env.size(), 1u);
  EXPECT_EQ(e.env[0], "LD_LIBRARY_PATH=" + t->lib_dir + ":/opt/x");
}

TEST(SameTorchRelease, ALocalVersionSuffixMatchesAnotherReleaseDoesNot) {
  EXPECT_TRUE(same_torch_release("2.11.0", "2.11.0+cu130"));
  EXPECT_TRUE(same_torch_release("2.11.0", "2.11.0"));
  EXPECT_FALSE(same_torch_release("2.11.0", "2.10.0+cu128"));
  EXPECT_FALSE(same_torch_release("2.11.0", "2.11.01"));
  EXPECT_TRUE(same_torch_release("", "2.10.0"));
}

}  // namespace
}  // namespace ak::cli
