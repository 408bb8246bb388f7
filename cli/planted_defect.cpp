// The planted defect of the `ttemu_planted` binary (emulator/link/planted_defect.hpp): M0D1P6's
// TT-link takes data frames whose CRC fails. Linked into that binary only, never into `ttemu`.
#include "emulator/link/planted_defect.hpp"

namespace ttemu::link {

const char* planted_defect_port() { return "M0D1P6"; }

}  // namespace ttemu::link
