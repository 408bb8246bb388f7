// ttemu: one binary, `ttemu NOUN VERB` subcommands (git/ip style), --help on each.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "launcher/topo_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ttemu: a multi-process emulator of Tenstorrent's TT-Fabric"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ttemu 0.1.0");
  ttemu::launcher::add_topo_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ttemu::Error& e) {
    std::fflush(stdout);  // what was printed so far comes before the reason
    fmt::print(stderr, "ttemu: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
