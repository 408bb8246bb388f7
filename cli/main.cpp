// ttemu: one binary, `ttemu NOUN VERB` subcommands (git/ip style), --help on each.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "emulator/common/error.hpp"
#include "launcher/launch.hpp"
#include "tools/campaign/campaign_command.hpp"
#include "tools/traffic/capture_command.hpp"
#include "tools/traffic/sim_command.hpp"
#include "launcher/diagnose_command.hpp"
#include "launcher/events_command.hpp"
#include "launcher/top_command.hpp"
#include "launcher/multi_host_commands.hpp"
#include "launcher/run_command.hpp"
#include "launcher/system_commands.hpp"
#include "launcher/topo_command.hpp"
#include "tools/traffic/traffic_command.hpp"

int main(int argc, char** argv) {
  // What follows "--" is a client command for `ttemu launch`, not ttemu's own arguments.
  std::vector<std::string> client;
  int own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      own = i;
      client.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  ttemu::launcher::set_command_line(argc, argv);
  CLI::App app{"ttemu: a multi-process emulator of Tenstorrent's TT-Fabric"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ttemu 0.1.0");
  int exit_status = 0;
  ttemu::launcher::add_topo_command(app);
  ttemu::launcher::add_system_commands(app, client, exit_status);
  ttemu::launcher::add_events_command(app);
  ttemu::launcher::add_top_command(app);
  ttemu::launcher::add_diagnose_command(app);
  ttemu::launcher::add_run_command(app, client, exit_status);
  ttemu::launcher::add_multi_host_commands(app, exit_status);
  ttemu::tools::add_traffic_command(app, exit_status);
  ttemu::tools::add_sim_command(app, exit_status);
  ttemu::tools::add_capture_command(app, client, exit_status);
  ttemu::tools::add_campaign_command(app, exit_status);
  try {
    app.parse(own, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print as CLI11 does; a usage error is one line like any other
    // error, with the parser's exit status.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::fflush(stdout);
    fmt::print(stderr, "ttemu: error: {} (see --help)\n", e.what());
    return e.get_exit_code();
  } catch (const std::exception& e) {
    std::fflush(stdout);  // what was printed so far comes before the reason
    fmt::print(stderr, "ttemu: error: {}\n", e.what());
    return 1;
  }
  return exit_status;
}
