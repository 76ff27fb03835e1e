#include "worker/python_step.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/process.h"

namespace ak {

namespace fs = std::filesystem;

PythonStepOutcome run_python_step(const PythonStep& step, const ConfinementPolicy& policy,
                                  std::chrono::steady_clock::time_point deadline,
                                  const std::function<bool(pid_t)>& started, const std::function<void()>& ended) {
  PythonStepOutcome out;
  ChildProcess::Options o;
  o.output_path = step.log.string();
  o.new_process_group = true;
  o.env = step.env;
  CgroupJob cgroup;
  if (policy.for_child().any()) {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(step.dir, ec))
      (void)!lchown(e.path().c_str(), policy.child_uid(), policy.child_gid());
    (void)!chown(step.dir.c_str(), policy.child_uid(), policy.child_gid());
    ConfinementPolicy::ChildView view;
    view.binds = {{step.dir.string(), step.dir.string(), false}};
    for (const std::string& p : step.read_only) view.binds.push_back({p, p, true});
    for (const std::string& f : step.shared) {
      const int fd = open(f.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd >= 0) {
        (void)!fchmod(fd, 0666);
        close(fd);
      }
      view.binds.push_back({f, f, false});
    }
    // The interpreter's installation and its virtual environment (bin/python -> <prefix>).
    const std::string python = find_executable(step.python);
    std::error_code pc;
    view.needed = {fs::absolute(python, pc).parent_path().parent_path().string(),
                   fs::weakly_canonical(python, pc).parent_path().parent_path().string()};
    cgroup = policy.make_cgroup(step.cgroup_name);
    view.cgroups = cgroup.dirs();
    o.confinement = policy.for_child(view);
    o.inherit_env = false;
    o.keep_env = kept_env_names();
    o.keep_env.push_back("PYTHONPATH");
    o.env.push_back("HOME=" + step.dir.string());
    o.env.push_back("TMPDIR=/tmp");
  }
  std::vector<std::string> argv = {step.python};
  argv.insert(argv.end(), step.args.begin(), step.args.end());
  auto child = ChildProcess::spawn(argv, o);
  if (!child.ok()) {
    out.exit_code = -1;
    std::ofstream(step.log, std::ios::app) << child.status().message() << "\n";
    return out;
  }
  if (started && !started(child->pid())) kill_process_group(child->pid());
  out.timed_out = !child->wait_until(deadline);
  // The group goes, at its deadline or after its exit: what it started goes with it, and so do its
  // pid namespace and its cgroup.
  out.exit_code = child->kill_group();
  cgroup.remove();
  if (ended) ended();
  return out;
}

}  // namespace ak
