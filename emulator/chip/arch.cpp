#include "emulator/chip/arch.hpp"

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::chip {

ArchSpec arch_spec(const std::string& arch) {
  constexpr size_t KiB = 1024, GiB = 1024 * 1024 * 1024ull;
  if (arch == "wormhole_b0" || arch == "wormhole") {
    return {"wormhole_b0", 72, 1464 * KiB, 16, 256 * KiB, 12 * GiB};
  }
  if (arch == "blackhole") return {"blackhole", 140, 1536 * KiB, 14, 512 * KiB, 32 * GiB};
  throw Error(fmt::format("unknown chip architecture '{}' (known: wormhole_b0, blackhole)", arch));
}

}  // namespace ttemu::chip
