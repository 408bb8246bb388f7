// What the launcher tells of a running system, in one place for the control plane and the
// host agents of a multi-host launch: the description clients read (job/description.hpp), and
// the parts of `ttemu status` that come from one chip's control block. A host agent reports
// its chips' parts to the control plane, which assembles the whole.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/chip/chip_control.hpp"
#include "emulator/control/system.hpp"
#include "emulator/job/description.hpp"
#include "launcher/launch.hpp"

namespace ttemu::launcher {

struct DescribeOptions {
  std::string system_path;  // absolute
  int data_fvcs = 0;
  std::string memory = "open";
  std::optional<uint64_t> dram_mib;
  std::vector<std::string> host_of_node;  // where each chip runs; empty: the spec's hosts
  std::string this_host;                  // empty on a single host
};
// What a launch's options say of its description; `multi`: the host this description is
// published on, in a multi-host launch.
DescribeOptions describe_options(const LaunchOptions& o, const control::System& sys, const MultiHost* multi);
job::SystemDescription describe_system(const control::System& sys, const job::JobId& job, const DescribeOptions& o);

// A chip's entry in `ttemu status` as its control block tells it (the caller adds pid, alive
// and host).
nlohmann::json chip_report(const control::System& sys, int node, const chip::ChipControl& block);
// One end of a link in `ttemu status`: its UDP port, state, counters and fallback.
nlohmann::json link_end_report(const chip::ChipControl& block, routing::PortId end, bool alive);

}  // namespace ttemu::launcher
