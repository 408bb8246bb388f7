#include "launcher/multi_host_commands.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emulator/common/error.hpp"
#include "emulator/control/host_placement.hpp"
#include "emulator/job/description.hpp"
#include "emulator/job/job.hpp"
#include "emulator/job/rank_binding.hpp"
#include "emulator/routing/address.hpp"
#include "emulator/control/system_yaml.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/host_agent.hpp"
#include "launcher/run_command.hpp"
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

// Words of a string, split at spaces (--mpi-args).
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The mpirun line for a program's ranks on a running system, as tt-run's: each rank bound to
// the chip the rank-binding file names (TTEMU_RANK_BINDING, read by the tt provider), and
// started on that chip's host (consecutive ranks of one host in one app context). On one host
// the ranks are told the job; across hosts each finds its host's own.
std::vector<std::string> ranks_line(const std::string& mpirun, const std::vector<std::string>& mpi_args, const job::SystemDescription& d,
                                    const std::string& binding, const std::vector<std::string>& program) {
  const auto entries = job::read_rank_binding(binding);
  if (entries.empty()) throw Error(fmt::format("{}: binds no rank", binding));
  std::vector<std::string> host_of_rank(entries.size());
  for (const auto& e : entries) {
    if (static_cast<size_t>(e.rank) >= entries.size()) {
      throw Error(fmt::format("{}: rank {} in a file of {} rank(s): ranks are 0 to {}", binding, e.rank, entries.size(), entries.size() - 1));
    }
    const auto chip = routing::parse_chip(e.chip);
    if (!chip) throw Error(fmt::format("{}: rank {}: '{}' is not a chip (like M0D3)", binding, e.rank, e.chip));
    const auto it = std::find_if(d.chips.begin(), d.chips.end(), [&](const auto& c) { return c.mesh == chip->mesh && c.device == chip->device; });
    if (it == d.chips.end()) throw Error(fmt::format("{}: rank {}: no chip {} in the running system ({})", binding, e.rank, e.chip, d.system_path));
    host_of_rank[static_cast<size_t>(e.rank)] = it->host;
  }
  const bool spread = !d.this_host.empty();
  std::vector<std::string> line{mpirun};
  line.insert(line.end(), mpi_args.begin(), mpi_args.end());
  // What every rank is told (Open MPI takes -x per app context).
  std::vector<std::string> env{"-x", "TTEMU_RANK_BINDING=" + std::filesystem::absolute(binding).string()};
  if (const std::string path = provider_path_with_ours(); !path.empty()) {
    env.push_back("-x");
    env.push_back("FI_PROVIDER_PATH=" + path);
  }
  if (!spread) {
    env.push_back("-x");
    env.push_back("TTEMU_JOB=" + d.job.text());
  }
  // Open MPI allocates each host once, with the most slots any context gives it: every context
  // names its host with all the ranks it runs.
  std::map<std::string, size_t> ranks_on;
  for (const auto& h : host_of_rank) ++ranks_on[h];
  for (size_t r = 0; r < host_of_rank.size();) {
    // On one host one context holds every rank; across hosts, each run of ranks on one host.
    size_t n = spread ? 1 : host_of_rank.size();
    while (spread && r + n < host_of_rank.size() && host_of_rank[r + n] == host_of_rank[r]) ++n;
    if (r > 0) line.push_back(":");
    line.push_back("-np");
    line.push_back(std::to_string(n));
    if (spread) {
      line.push_back("--host");
      line.push_back(fmt::format("{}:{}", host_of_rank[r], ranks_on[host_of_rank[r]]));
    }
    line.insert(line.end(), env.begin(), env.end());
    line.insert(line.end(), program.begin(), program.end());
    r += n;
  }
  return line;
}

// Says the line, then becomes it.
[[noreturn]] void exec_line(const std::vector<std::string>& line) {
  fmt::print(stderr, "ttemu: {}\n", fmt::join(line, " "));
  const int error = exec_program(line);
  throw Error(fmt::format("cannot run '{}': {}", line[0], std::strerror(error)));
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
  auto binding = std::make_shared<std::string>();
  auto mpi_args = std::make_shared<std::string>();
  auto job_name = std::make_shared<std::string>();
  auto* wrap = app.add_subcommand("mpirun", "Start a system across hosts (mpirun with one ttemu host-agent per host), or run a "
                                            "program's ranks on it, each on the host of its chip (--rank-binding)");
  add_launch_options(wrap, mo->launch);
  wrap->add_option("--network", mo->network, "Passed to each host-agent: where links bind (CIDR or interface)");
  wrap->add_option("--mpirun", *mpirun_exe, "The mpirun to run (default: mpirun from PATH)");
  wrap->add_option("--rank-binding", *binding,
                   "Run the program after -- on the running system: rank r bound to the chip the file names "
                   "(rank_bindings: [{rank: 0, chip: M0D0}, ...]) and started on that chip's host");
  wrap->add_option("--mpi-args", *mpi_args, "With --rank-binding: mpirun's options, in one string (\"--mca btl self,tcp\")");
  wrap->add_option("--job", *job_name, "With --rank-binding: the job (default: $TTEMU_JOB, else the only one on this host)");
  wrap->footer("ttemu mpirun SYSTEM.yaml [options] -- [mpirun options: --host A,B, --hostfile F, --mca ...]\n"
               "  runs: mpirun --enable-recovery -np <hosts> [mpirun options] ttemu host-agent SYSTEM.yaml [options]\n"
               "ttemu mpirun --rank-binding FILE [--mpi-args \"...\"] -- PROGRAM [ARGS]\n"
               "  runs: mpirun [mpi args] -x TTEMU_RANK_BINDING=FILE ... -np K --host H:K PROGRAM [: ...], a context per host");
  wrap->callback([mo, mpirun_exe, binding, mpi_args, job_name] {
    const auto& all = command_line();
    size_t dashes = 1;
    while (dashes < all.size() && all[dashes] != "mpirun") ++dashes;
    while (dashes < all.size() && all[dashes] != "--") ++dashes;
    const std::vector<std::string> after(dashes < all.size() ? all.begin() + static_cast<long>(dashes) + 1 : all.end(), all.end());
    if (!binding->empty()) {
      if (!mo->launch.file.empty()) {
        throw Error("give either a system specification (start its host agents) or --rank-binding (run a program on the running system), not both");
      }
      if (after.empty()) throw Error("--rank-binding: give the program to run after --");
      const job::JobId id = job::find_job(job_name->empty() ? std::nullopt : std::optional<std::string>(*job_name));
      // The ranks' own binding comes from the file: an outer one would take precedence.
      ::unsetenv("TTEMU_CHIP");
      ::unsetenv("TTEMU_CORE");
      exec_line(ranks_line(*mpirun_exe, words_of(*mpi_args), job::read_description(id), *binding, after));
    }
    if (mo->launch.file.empty()) throw Error("mpirun needs the system specification (or --rank-binding to run a program on a running one)");
    if (!mpi_args->empty() || !job_name->empty()) throw Error("--mpi-args and --job go with --rank-binding; give mpirun's options after --");
    const control::System sys = control::load_system(mo->launch.file);
    std::ignore = control::place_chips(sys);  // every chip has a host, or say why here
    // The agents get this command's own options (all but --mpirun), as written.
    std::vector<std::string> agent_args;
    size_t i = 1;
    while (i < all.size() && all[i] != "mpirun") ++i;
    for (++i; i < dashes; ++i) {
      if (all[i] == "--mpirun") {
        ++i;
        continue;
      }
      if (all[i].rfind("--mpirun=", 0) == 0) continue;
      agent_args.push_back(all[i]);
    }
    exec_line(agents_line(*mpirun_exe, static_cast<int>(sys.hosts.size()), after, agent_args));
  });
}

}  // namespace ttemu::launcher
