// The bytes `ttemu traffic` and `ttemu sim` write and check: a check that passed on anything
// would verify nothing.
#include "emulator/control/traffic_patterns.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ttemu::control {
namespace {

TEST(TrafficPatterns, ACheckPassesOnTheWrittenBytesAndFailsOnAnyOtherByte) {
  std::vector<uint8_t> block(16384);
  fill_pattern(block, 3, 7, 2);
  EXPECT_TRUE(check_pattern(block, 3, 7, 2));
  EXPECT_FALSE(check_pattern(block, 3, 7, 1)) << "another write of the same pair";
  EXPECT_FALSE(check_pattern(block, 7, 3, 2)) << "the other direction";
  for (size_t at : {size_t{0}, size_t{4095}, size_t{16383}}) {
    block[at] ^= 0x10;
    EXPECT_FALSE(check_pattern(block, 3, 7, 2)) << "one flipped bit at byte " << at;
    block[at] ^= 0x10;
  }
  EXPECT_TRUE(check_pattern(block, 3, 7, 2));
}

}  // namespace
}  // namespace ttemu::control
