#include "emulator/link/planted_defect.hpp"

#include <cstdio>

namespace ttemu::link {

// Weak: a binary that defines it (ttemu_planted) names a port; every other binary names none.
__attribute__((weak)) const char* planted_defect_port() { return nullptr; }

bool skips_crc_check(uint16_t mesh, uint16_t device, uint8_t port) {
  const char* planted = planted_defect_port();
  if (planted == nullptr) return false;
  unsigned m = 0, d = 0, p = 0;
  char more = 0;
  return std::sscanf(planted, "M%uD%uP%u%c", &m, &d, &p, &more) == 3 && m == mesh && d == device && p == port;
}

}  // namespace ttemu::link
