// A child that tries one forbidden thing and prints what happened, for confine_test.cc:
//   confine_child <what> [arg]
// prints "ok <detail>" when it could, "denied <errno text>" when the kernel refused. Exit code 0
// either way (the test reads the line), 2 for a usage error.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

int report(bool ok, const std::string& detail = "") {
  if (ok) {
    std::cout << "ok " << detail << std::endl;
  } else {
    std::cout << "denied " << std::strerror(errno) << std::endl;
  }
  return 0;
}

std::string status_field(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + ":", 0) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string what = argv[1];
  const std::string arg = argc > 2 ? argv[2] : "";
  if (what == "id") {
    std::cout << "ok uid " << getuid() << " euid " << geteuid() << " gid " << getgid() << " pid " << getpid()
              << " capeff " << status_field("CapEff") << " capbnd " << status_field("CapBnd") << " nnp "
              << status_field("NoNewPrivs") << " seccomp " << status_field("Seccomp") << std::endl;
    return 0;
  }
  if (what == "read") {
    std::ifstream in(arg);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return report(false);
    return report(true, std::to_string(ss.str().size()) + " bytes");
  }
  if (what == "write") {
    const int fd = open(arg.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return report(false);
    const bool ok = write(fd, "x", 1) == 1;
    close(fd);
    return report(ok);
  }
  if (what == "exists") {
    struct stat st {};
    return report(stat(arg.c_str(), &st) == 0);
  }
  if (what == "kill") return report(kill(static_cast<pid_t>(std::atol(arg.c_str())), SIGKILL) == 0);
  if (what == "ptrace") return report(ptrace(PTRACE_ATTACH, static_cast<pid_t>(std::atol(arg.c_str())), 0, 0) == 0);
  if (what == "inet") {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return report(false);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(arg.c_str())));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return report(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connected");
  }
  if (what == "listen") {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return report(false);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    return report(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 1) == 0, "listening");
  }
  if (what == "unix") {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return report(false);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, arg.c_str(), sizeof a.sun_path - 1);
    return report(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connected");
  }
  if (what == "mount") return report(mount("tmpfs", "/mnt", "tmpfs", 0, nullptr) == 0);
  if (what == "unshare") return report(unshare(CLONE_NEWUSER) == 0);
  if (what == "setuid0") return report(setuid(0) == 0 && getuid() == 0);
  if (what == "pids") {
    // How many processes this child can see.
    int n = 0;
    if (DIR* d = opendir("/proc")) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ++n;
      closedir(d);
    }
    return report(true, std::to_string(n));
  }
  if (what == "daemon") {
    // A grandchild that outlives this process: prints its pid, then sleeps.
    const pid_t pid = fork();
    if (pid == 0) {
      setsid();
      if (fork() == 0) {
        for (;;) pause();
      }
      _exit(0);
    }
    waitpid(pid, nullptr, 0);
    std::cout << "ok forked" << std::endl;
    for (;;) pause();  // the test kills us
  }
  if (what == "forkbomb") {
    int n = 0;
    for (; n < 10000; ++n) {
      const pid_t pid = fork();
      if (pid < 0) break;
      if (pid == 0) {
        pause();
        _exit(0);
      }
    }
    std::cout << (n < 10000 ? "denied " : "ok ") << n << " forks" << std::endl;
    return 0;
  }
  if (what == "exit") return std::atoi(arg.c_str());
  if (what == "signal") {
    signal(std::atoi(arg.c_str()), SIG_DFL);
    raise(std::atoi(arg.c_str()));
    return 1;
  }
  if (what == "env") {
    extern char** environ;
    for (char** e = environ; *e; ++e) std::cout << *e << "\n";
    std::cout << "ok env" << std::endl;
    return 0;
  }
  return 2;
}
