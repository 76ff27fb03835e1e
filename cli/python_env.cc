#include "cli/python_env.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/process.h"

namespace ak::cli {

PythonChoice choose_python(const std::string& flag, const std::string& env_value, const std::string& configured) {
  if (!flag.empty()) return {flag, "--python"};
  if (!env_value.empty()) return {env_value, "AK_PYTHON"};
  std::error_code ec;
  if (!configured.empty() && std::filesystem::is_regular_file(configured, ec))
    return {configured, "the build's default"};
  const std::string found = find_executable("python3");
  return {found.empty() ? "python3" : found, "PATH"};
}

Result<TorchLocation> locate_torch(const std::string& python) {
  // One line, "TORCH <folder of torch/__init__.py>" or "TORCH " when there is none.
  static const char* kScript =
      "import importlib.util, os\n"
      "s = importlib.util.find_spec('torch')\n"
      "print('TORCH ' + (os.path.dirname(s.origin) if s and s.origin else ''), flush=True)\n";
  SpawnOptions o;
  o.capture_stdout = true;
  auto child = ChildProcess::spawn({python, "-c", kScript}, o);
  if (!child.ok()) return Status::unavailable("cannot start Python '" + python + "': " + child.status().message());
  auto line = child->wait_for_line("TORCH ", std::chrono::seconds(20));
  child->kill_group();
  if (!line.ok())
    return Status::unavailable("Python '" + python + "' did not say where torch is: " + line.status().message());
  if (line->empty()) return Status::not_found(python + " has no torch");
  TorchLocation t;
  t.lib_dir = *line + "/lib";
  std::ifstream version(*line + "/version.py");
  std::stringstream text;
  text << version.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  if (std::regex_search(s, m, std::regex(R"(__version__\s*=\s*['"]([^'"]+)['"])"))) t.version = m[1];
  return t;
}

SandboxEnvironment sandbox_environment(const PythonChoice& choice, const std::string& built_torch,
                                       const std::string& inherited_ld_path) {
  SandboxEnvironment e;
  const std::string who = "Python " + choice.path + " (from " + choice.source + ")";
  auto torch = locate_torch(choice.path);
  if (!torch.ok()) {
    e.warning = true;
    e.message = who + ": " + torch.status().message() +
                "; KernelBench, model and triton jobs will fail, and the sandbox loads the libtorch its RUNPATH "
                "or LD_LIBRARY_PATH names; give a Python with torch " +
                (built_torch.empty() ? std::string("") : built_torch + " ") + "by --python or AK_PYTHON";
    return e;
  }
  if (!same_torch_release(built_torch, torch->version)) {
    e.warning = true;
    e.message = who + " has torch " + torch->version + " but the sandbox was built against " + built_torch +
                "; the sandbox loads the libtorch its RUNPATH or LD_LIBRARY_PATH names; give a Python with torch " +
                built_torch + " by --python or AK_PYTHON";
    return e;
  }
  e.env.push_back("LD_LIBRARY_PATH=" + torch->lib_dir + (inherited_ld_path.empty() ? "" : ":" + inherited_ld_path));
  e.message = who + ", torch " + torch->version + " from " + torch->lib_dir;
  return e;
}

bool same_torch_release(const std::string& built, const std::string& found) {
  if (built.empty()) return true;
  return found == built || found.rfind(built + "+", 0) == 0;
}

}  // namespace ak::cli
