#pragma once

// A defect planted on purpose, to show that a campaign finds it (docs/campaigns.md, "A planted
// defect"): the TT-link of one port takes data frames whose CRC fails, as if its receiver
// skipped the check.
//
// Every real binary has none: the library's definition is weak and names no port. The
// `ttemu_planted` binary (cli/planted_defect.cpp) links a strong definition that names M0D1P6,
// so the planted build is one more link of the same objects, not a second build of everything.

#include <cstdint>

namespace ttemu::link {

// The port whose TT-link skips the CRC check of data frames ("M0D1P6"), or nullptr.
const char* planted_defect_port();

// Whether the link of port `port` of chip M`mesh`D`device` is that port. Asked only of a frame
// whose CRC failed, so it costs nothing on the packet path.
bool skips_crc_check(uint16_t mesh, uint16_t device, uint8_t port);

}  // namespace ttemu::link
