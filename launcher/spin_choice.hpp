// How long a launch's chips poll after traffic before they sleep, when `--spin-us` is not
// given: the one rule that `ttemu launch` applies and that the benchmarks apply to their raw
// processes, so that the yardstick waits the way the chips do.
#pragma once

#include <cstddef>

namespace ttemu::launcher {

// `--spin-us` not given: resolve_spin_us() chooses.
inline constexpr int kSpinAuto = -1;
// The spin a launch's chips use when --spin-us is not given (docs/fabric.md#transports): with a
// CPU for every chip of the launch, over any transport, a chip that has just had traffic polls
// for kAutoSpinUs before it sleeps, since waking a sleeping peer is what held one link to a
// third of its speed over shm, four fifths over io_uring and nine tenths over UDP. 1 ms, not
// the 100 us of before: a peer's stall longer than the spin (a VM's cross-CPU wake-up, a turn
// of another task) puts both chips of a shm link into sleeping in turn, at 0.6 of the speed.
// With more chips than CPUs, where spinning chips only take turns, 0: sleep at once.
inline constexpr int kAutoSpinUs = 1000;

// The spin for `option` (kSpinAuto, or the microseconds asked for) with `chips` chips on a
// host whose process may run on `cpus` CPUs.
constexpr int resolve_spin_us(int option, size_t chips, size_t cpus) {
  if (option != kSpinAuto) return option;
  return chips <= cpus ? kAutoSpinUs : 0;
}

}  // namespace ttemu::launcher
