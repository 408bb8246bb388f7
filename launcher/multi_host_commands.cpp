#include "launcher/multi_host_commands.hpp"

#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emulator/common/error.hpp"
#include "emulator/control/host_placement.hpp"
#include "emulator/control/system_yaml.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/host_agent.hpp"
#include "launcher/system_commands.hpp"

namespace ttemu::launcher {

namespace {

// The mpirun line for a system's host agents: one per host (rank r runs the spec's r-th
// host), recovery on (a host that dies is ttemu's to handle: the others keep running), the
// user's mpirun options, then this ttemu as `host-agent` with the same options.
std::vector<std::string> agents_line(const std::string& mpirun, int hosts, const std::vector<std::string>& mpirun_args,
                                     const std::vector<std::string>& agent_args) {
  std::vector<std::string> line{mpirun, "--enable-recovery", "-np", std::to_string(hosts)};
  line.insert(line.end(), mpirun_args.begin(), mpirun_args.end());
  line.push_back(self_exe());
  line.push_back("host-agent");
  line.insert(line.end(), agent_args.begin(), agent_args.end());
  return line;
}

}  // namespace

void add_multi_host_commands(CLI::App& app, int& exit_status) {
  auto ao = std::make_shared<HostAgentOptions>();
  auto* agent = app.add_subcommand("host-agent", "One host of a system spread across hosts (started by mpirun or srun, one per host)");
  add_launch_options(agent, ao->launch);
  agent->add_option("--network", ao->network,
                    "Where this host's links bind: a CIDR network (10.1.0.0/24, fd00::/64) or an interface (default: "
                    "the first non-loopback IPv4 address)");
  agent->add_option("--connect-timeout", ao->connect_timeout, "Seconds an agent waits to reach the control plane")
      ->check(number_in(0.1, 3600));
  agent->footer("Rank 0 is the control plane; rank r runs the chips of the specification's r-th Host. See docs/multi-host.md.");
  agent->callback([ao, &exit_status] {
    if (ao->launch.file.empty()) throw Error("host-agent needs the system specification (the same file on every host)");
    exit_status = run_host_agent(*ao);
  });

  auto mo = std::make_shared<HostAgentOptions>();
  auto mpirun_exe = std::make_shared<std::string>("mpirun");
  auto* wrap = app.add_subcommand("mpirun", "Start a system across hosts: mpirun with one ttemu host-agent per host of the specification");
  add_launch_options(wrap, mo->launch);
  wrap->add_option("--network", mo->network, "Passed to each host-agent: where links bind (CIDR or interface)");
  wrap->add_option("--mpirun", *mpirun_exe, "The mpirun to run (default: mpirun from PATH)");
  wrap->footer("ttemu mpirun SYSTEM.yaml [options] -- [mpirun options: --host A,B, --hostfile F, --mca ...]\n"
               "runs: mpirun --enable-recovery -np <hosts> [mpirun options] ttemu host-agent SYSTEM.yaml [options]");
  wrap->callback([mo, mpirun_exe] {
    if (mo->launch.file.empty()) throw Error("mpirun needs the system specification");
    const control::System sys = control::load_system(mo->launch.file);
    std::ignore = control::place_chips(sys);  // every chip has a host, or say why here
    // The agents get this command's own options (all but --mpirun), as written.
    const auto& all = command_line();
    std::vector<std::string> agent_args, mpirun_args;
    size_t i = 1;
    while (i < all.size() && all[i] != "mpirun") ++i;
    for (++i; i < all.size() && all[i] != "--"; ++i) {
      if (all[i] == "--mpirun") {
        ++i;
        continue;
      }
      if (all[i].rfind("--mpirun=", 0) == 0) continue;
      agent_args.push_back(all[i]);
    }
    if (i < all.size()) mpirun_args.assign(all.begin() + static_cast<long>(i) + 1, all.end());
    const auto line = agents_line(*mpirun_exe, static_cast<int>(sys.hosts.size()), mpirun_args, agent_args);
    fmt::print(stderr, "ttemu: {}\n", fmt::join(line, " "));
    std::vector<char*> argv;
    for (const auto& a : line) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    throw Error(fmt::format("cannot run '{}': {}", *mpirun_exe, std::strerror(errno)));
  });
}

}  // namespace ttemu::launcher
