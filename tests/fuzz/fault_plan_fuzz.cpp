// libFuzzer target: arbitrary text as a fault plan for an N300 (its wiring written out here, so
// the target needs no system loader). A plan is either parsed into faults within their
// documented ranges, or refused with one ttemu::Error line that names the source; nothing may
// crash, hang, or throw anything else.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "emulator/common/error.hpp"
#include "emulator/link/fault_plan.hpp"

using namespace ttemu;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const routing::Wiring wiring{"n300.yaml",
                                      {{{{0, 0}, 2}, {{0, 1}, 6}}, {{{0, 0}, 3}, {{0, 1}, 7}}}};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const link::FaultPlan plan = link::parse_fault_plan(text, "plan.yaml", wiring);
    if (plan.seed && *plan.seed > link::kMaxSeed) std::abort();
    for (const auto& [port, f] : plan.tx) {
      if (!wiring.peer(port)) std::abort();  // faults only on wired ports
      for (double p : {f.corrupt, f.drop}) {
        if (!(p >= 0 && p <= 1)) std::abort();
      }
      if (!(f.ber >= 0 && f.ber <= 1)) std::abort();
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("plan.yaml", 0) != 0 || what.find('\n') != std::string::npos) {
      std::fprintf(stderr, "not one line naming the plan: [%s]\n", what.c_str());
      std::abort();
    }
  }
  return 0;
}
