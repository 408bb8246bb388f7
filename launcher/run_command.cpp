#include "launcher/run_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/job/description.hpp"
#include "emulator/job/job.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::launcher {

std::string provider_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const auto dir = exe.parent_path().parent_path() / "libfabric_tt" / "prov";
  return std::filesystem::exists(dir / "libtt-fi.so", ec) ? dir.string() : std::string();
}

std::string provider_path_with_ours() {
  const std::string dir = provider_dir();
  const char* now = std::getenv("FI_PROVIDER_PATH");
  if (dir.empty() || (now && std::string(now).find(dir) != std::string::npos)) return now ? now : "";
  return now && *now ? dir + ":" + now : dir;
}

void export_provider_path() {
  const std::string path = provider_path_with_ours();
  if (!path.empty()) ::setenv("FI_PROVIDER_PATH", path.c_str(), 1);
}

int exec_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  return errno;
}

namespace {

struct RunOptions {
  std::string chip, rank_binding, job;
  int core = -1;
};

void run(const RunOptions& o, const std::vector<std::string>& client) {
  if (client.empty()) throw Error("ttemu run: nothing to run (give the command after --)");
  if (o.chip.empty() == o.rank_binding.empty()) throw Error("ttemu run: give one of --chip or --rank-binding");
  const job::JobId id = job::find_job(o.job.empty() ? std::nullopt : std::optional<std::string>(o.job));
  const job::SystemDescription d = job::read_description(id);
  // One binding: what an outer environment said of another is dropped.
  ::unsetenv("TTEMU_CHIP");
  ::unsetenv("TTEMU_CORE");
  ::unsetenv("TTEMU_RANK_BINDING");
  if (!o.chip.empty()) {
    const auto chip = routing::parse_chip(o.chip);
    if (!chip) throw Error(fmt::format("--chip {}: not a chip (like M0D3)", o.chip));
    bool found = false;
    for (const auto& c : d.chips) found = found || (c.mesh == chip->mesh && c.device == chip->device);
    if (!found) throw Error(fmt::format("--chip {}: no such chip in the running system ({})", o.chip, d.system_path));
    ::setenv("TTEMU_CHIP", routing::to_string(*chip).c_str(), 1);
    if (o.core >= 0) ::setenv("TTEMU_CORE", std::to_string(o.core).c_str(), 1);
  } else {
    if (!std::filesystem::exists(o.rank_binding)) throw Error(fmt::format("--rank-binding {}: no such file", o.rank_binding));
    ::setenv("TTEMU_RANK_BINDING", std::filesystem::absolute(o.rank_binding).c_str(), 1);
  }
  ::setenv("TTEMU_JOB", id.text().c_str(), 1);
  export_provider_path();
  const int error = exec_program(client);
  throw Error(fmt::format("ttemu run: cannot start {}: {}", client[0], std::strerror(error)));
}

}  // namespace

void add_run_command(CLI::App& app, const std::vector<std::string>& client, int& exit_status) {
  (void)exit_status;  // the program replaces ttemu: its exit status is the run's
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a program bound to a chip of the running system (ttemu run --chip M0D3 -- CMD)");
  cmd->add_option("--chip", o->chip, "The chip its libfabric endpoints (provider tt) and workers are on, like M0D3");
  cmd->add_option("--core", o->core, "The worker core (default: the first from 0 that no provider endpoint holds)")->check(CLI::Range(0, 127));
  cmd->add_option("--rank-binding", o->rank_binding,
                  "A rank-binding file for the ranks an mpirun starts (rank_bindings: [{rank: 0, chip: M0D0}, ...])");
  cmd->add_option("--job", o->job, "The job (default: $TTEMU_JOB, else the only running one)");
  cmd->footer("The command follows --. It sees TTEMU_CHIP (or TTEMU_RANK_BINDING), TTEMU_JOB and FI_PROVIDER_PATH.");
  cmd->callback([o, &client] { run(*o, client); });
}

}  // namespace ttemu::launcher
