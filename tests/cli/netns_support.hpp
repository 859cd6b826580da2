#pragma once
// Two hosts as network namespaces on a bridge, each with its own address, for the tests that run
// `stretch launch --launcher netns` (the remote-exec step is `ip netns exec`) and, with sshd
// started in each namespace, the ssh-based runners. Needs root (CAP_NET_ADMIN); skipReason()
// says why not otherwise.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace stretch::test::launch {

class NetnsHosts {
 public:
  // Names start with `tag` (bridge TAGbrID, namespaces TAGxIDhN, veth links TAGvIDaN/TAGvIDbN;
  // ID from this process's id) and the subnet is 10.<subnet>.ID.0/24: test programs that may run
  // at the same time pass different tags and subnets.
  explicit NetnsHosts(const std::string& tag = "st", int subnet = 231) {
    const int id = static_cast<int>(::getpid() % 200) + 20;
    bridge_ = tag + "br" + std::to_string(id);
    subnet_ = "10." + std::to_string(subnet) + "." + std::to_string(id);
    if (::geteuid() != 0) {
      why_ = "needs root for `ip netns` and veth links";
      return;
    }
    std::vector<std::string> cmds = {"ip link add " + bridge_ + " type bridge",
                                     "ip addr add " + subnet_ + ".1/24 dev " + bridge_,
                                     "ip link set " + bridge_ + " up"};
    for (int i = 1; i <= 2; ++i) {
      const std::string ns = tag + "x" + std::to_string(id) + "h" + std::to_string(i);
      const std::string a = tag + "v" + std::to_string(id) + "a" + std::to_string(i);
      const std::string b = tag + "v" + std::to_string(id) + "b" + std::to_string(i);
      hosts_.push_back(ns);
      links_.push_back(a);
      cmds.push_back("ip netns add " + ns);
      cmds.push_back("ip link add " + a + " type veth peer name " + b);
      cmds.push_back("ip link set " + a + " master " + bridge_ + " up");
      cmds.push_back("ip link set " + b + " netns " + ns);
      cmds.push_back("ip -n " + ns + " addr add " + subnet_ + "." + std::to_string(i + 1) +
                     "/24 dev " + b);
      cmds.push_back("ip -n " + ns + " link set " + b + " up");
      cmds.push_back("ip -n " + ns + " link set lo up");
    }
    for (const auto& c : cmds) {
      if (std::system((c + " 2>/dev/null").c_str()) != 0) {
        why_ = "`" + c + "` failed (no CAP_NET_ADMIN in this container?)";
        return;
      }
    }
  }
  ~NetnsHosts() {
    for (const pid_t pid : sshdPids_)
      ::kill(pid, SIGTERM);
    for (const auto& h : hosts_)
      std::system(("ip netns del " + h + " 2>/dev/null").c_str());
    for (const auto& l : links_)
      std::system(("ip link del " + l + " 2>/dev/null").c_str());
    std::system(("ip link del " + bridge_ + " 2>/dev/null").c_str());
  }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // Starts sshd in every namespace (port 22 of the host's own address) with keys made in `dir`;
  // the launcher's ssh then needs sshArgs(). Returns a reason when it cannot.
  std::string startSshd(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    using namespace std::chrono_literals;
    if (!fs::exists("/usr/sbin/sshd") || std::system("command -v ssh >/dev/null 2>&1") != 0)
      return "needs openssh-server and openssh-client";
    fs::create_directories("/run/sshd");
    key_ = dir / "client";
    const std::string keygen = "ssh-keygen -q -t ed25519 -N '' -f ";
    if (std::system((keygen + (dir / "hostkey").string()).c_str()) != 0 ||
        std::system((keygen + key_.string()).c_str()) != 0)
      return "ssh-keygen failed";
    fs::copy_file(dir / "client.pub", dir / "authorized_keys");
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const fs::path conf = dir / ("sshd_" + std::to_string(i) + ".conf");
      std::ofstream(conf) << "ListenAddress " << hostAddress(static_cast<int>(i)) << "\nPort 22\n"
                          << "HostKey " << (dir / "hostkey").string() << "\n"
                          << "AuthorizedKeysFile " << (dir / "authorized_keys").string() << "\n"
                          << "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
                          << "PidFile " << (dir / ("sshd_" + std::to_string(i) + ".pid")).string()
                          << "\n";
      const std::string cmd = "ip netns exec " + hosts_[i] + " /usr/sbin/sshd -f " + conf.string() +
                              " -E " + (dir / ("sshd_" + std::to_string(i) + ".log")).string();
      if (std::system(cmd.c_str()) != 0)
        return "`" + cmd + "` failed";
    }
    // sshd writes its pid file once it listens; remember the pids (the directory goes first).
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const fs::path pidFile = dir / ("sshd_" + std::to_string(i) + ".pid");
      pid_t pid = -1;
      for (int tries = 0; tries < 200 && pid <= 0; ++tries) {
        std::ifstream in(pidFile);
        if (!(in >> pid))
          std::this_thread::sleep_for(10ms);
      }
      if (pid > 0)
        sshdPids_.push_back(pid);
    }
    return {};
  }
  // ssh options that log in to the namespaces with the test's key and no host-key prompts.
  std::string sshArgs() const {
    return "-i " + key_.string() +
           " -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR";
  }

  const std::string& skipReason() const { return why_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  std::string launcherAddress() const { return subnet_ + ".1"; }
  std::string hostAddress(int i) const { return subnet_ + "." + std::to_string(i + 2); }

 private:
  std::string bridge_, subnet_, why_;
  std::vector<std::string> hosts_, links_;
  std::filesystem::path key_;
  std::vector<pid_t> sshdPids_;
};

}  // namespace stretch::test::launch
