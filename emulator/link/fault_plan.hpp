// A fault plan: which faults each link direction suffers (docs/fault-plan.md).
//
//   seed: 42                       # optional; `--seed` overrides
//   defaults: {corrupt: 0.001}     # optional; every direction of every link
//   links:
//     - link: M0D0P2               # a port names a link by one of its ends
//       direction: out             # out: frames this port sends; in: frames it receives; both
//       corrupt: 0.1               # per-frame probability ...
//       ber: 1.0e-6                # ... or a bit-error rate
//       burst: {enter_bad: 0.01, leave_bad: 0.2, corrupt_in_bad: 0.5}   # Gilbert-Elliott
//       drop: 0.01
//       delay_us: 100
//       down: [{at: 2.0, for: 0.5}]   # seconds since the link started
//
// Faults act on the wire, so each resolves to the port that transmits into it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "emulator/routing/wiring.hpp"
#include "emulator/link/fault_injector.hpp"

namespace ttemu::link {

// The largest seed (docs/fault-plan.md), for plans and `--seed` alike.
inline constexpr uint64_t kMaxSeed = 9'000'000'000'000'000;

struct FaultPlan {
  std::optional<uint64_t> seed;
  std::map<routing::PortId, DirectionFaults> tx;  // by transmitting port
};

// Throws ttemu::Error "<source>:<line>: ..." naming the culprit.
FaultPlan parse_fault_plan(std::string_view yaml_text, const std::string& source,
                           const routing::Wiring& wiring);
FaultPlan load_fault_plan(const std::string& path, const routing::Wiring& wiring);

nlohmann::json to_json(const DirectionFaults& f);
DirectionFaults faults_from_json(const nlohmann::json& j);

}  // namespace ttemu::link
