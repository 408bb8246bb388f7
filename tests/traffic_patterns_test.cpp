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

// Filled and checked a block at a time, the bytes are still pattern_byte's, for any length
// (a write need not be a whole number of blocks).
TEST(TrafficPatterns, EveryByteIsPatternBytesWhateverTheLength) {
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{4096}}) {
    std::vector<uint8_t> block(n);
    fill_pattern(block, 5, 2, 9);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(block[i], pattern_byte(5, 2, 9, i)) << "byte " << i << " of " << n;
    EXPECT_TRUE(check_pattern(block, 5, 2, 9)) << n;
    block[n - 1] ^= 1;
    EXPECT_FALSE(check_pattern(block, 5, 2, 9)) << "the last byte of " << n;
  }
}

}  // namespace
}  // namespace ttemu::control
