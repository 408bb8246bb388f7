// The benchmarks' command lines, parsed with CLI11 and checked as ttemu's own are
// (launcher/cli_checks.hpp): a bad value is one line naming it and exit status 2, not an
// uncaught std::stoi exception or atoi's silent 0.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/process/cpu_binding.hpp"
#include "emulator/wire/transport.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/spin_choice.hpp"

namespace ttemu::bench {

using launcher::number_in;
using launcher::whole_number;

// What `ttemu launch --spin-us` accepts: the benchmarks pass their --spin-us on to it.
inline constexpr int kMaxSpinUs = 100000;
// Rounds of a benchmark (--repeat): a bound only against typos.
inline constexpr int kMaxRepeat = 1000;

// The help's group of the modes a benchmark runs itself in (inside a launched system).
inline constexpr const char* kInternal = "Run by the benchmark itself";

// Parses the command line. Returns the status main is to exit with if it stops here: 0 after
// --help, 2 after a usage error, told as one line "NAME: reason" on stderr (not the help).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    fmt::print(stderr, "{}: {}\n", app.get_name(), e.what());
    return 2;
  }
  return std::nullopt;
}

// --transport NAME: one of wire::kTransports.
inline CLI::Option* add_transport(CLI::App& app, std::string& out, const std::string& help) {
  return app.add_option("--transport", out, help)->check(CLI::IsMember(wire::kTransports))->capture_default_str();
}

// --repeat R: rounds of the benchmark, or runs per figure.
inline CLI::Option* add_repeat(CLI::App& app, int& out, const std::string& help) {
  return app.add_option("--repeat", out, help)->check(whole_number(1, kMaxRepeat))->capture_default_str();
}

// A --spin-us not given: the chips spin as `ttemu launch` chooses by default (with a CPU per
// chip, kAutoSpinUs in launcher/spin_choice.hpp; else 0), and raw processes as the chips of the
// system they stand for.
inline constexpr int kLaunchChooses = launcher::kSpinAuto;

// --spin-us N, passed on to the chips (at least `lo`). With `out` at kLaunchChooses, a run
// without the option leaves it there.
inline CLI::Option* add_spin_us(CLI::App& app, int& out, const std::string& help, int lo = 0) {
  auto* o = app.add_option("--spin-us", out, out == kLaunchChooses ? help + " (default: as ttemu launch chooses)" : help)
                ->check(whole_number(lo, kMaxSpinUs));
  return out == kLaunchChooses ? o : o->capture_default_str();
}
// The launch option for a --spin-us (none when the launch chooses; it starts with a space).
inline std::string spin_flag(int spin_us) { return spin_us == kLaunchChooses ? "" : fmt::format(" --spin-us {}", spin_us); }
// A --spin-us as the benchmarks' JSON reports it.
inline nlohmann::json spin_json(int spin_us) {
  return spin_us == kLaunchChooses ? nlohmann::json("launch default") : nlohmann::json(spin_us);
}
// How long raw processes standing for a system of `chips` chips spin for a --spin-us: what
// `ttemu launch` would choose for that system on this host.
inline std::chrono::microseconds raw_spin(int spin_us, size_t chips) {
  return std::chrono::microseconds(launcher::resolve_spin_us(spin_us, chips, process::allowed_cpus().size()));
}

// --transport LIST: comma-separated names, each one of wire::kTransports.
inline CLI::Option* add_transports(CLI::App& app, std::vector<std::string>& out, const std::string& help) {
  return app.add_option("--transport", out, help)
      ->delimiter(',')
      ->check(CLI::IsMember(wire::kTransports))
      ->capture_default_str();
}

}  // namespace ttemu::bench
