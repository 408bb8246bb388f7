// TT-link's CRC-32 (emulator/link/frame.hpp): the Ethernet FCS, and no vector state left behind.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <isa-l/crc.h>

#include "emulator/link/frame.hpp"

namespace {

std::vector<uint8_t> frame_payload() {
  std::vector<uint8_t> p(4096);
  std::iota(p.begin(), p.end(), uint8_t{7});
  return p;
}

// XINUSE (XGETBV with ECX=1): which parts of the vector state are in use. Bit 2 is the upper
// halves of ymm0-15, bit 6 the upper halves of zmm0-15; vzeroupper clears both.
bool can_read_xinuse() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(0xD, 1, &a, &b, &c, &d) && (a & (1u << 2));
}
uint64_t upper_halves_in_use() {
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return ((uint64_t{hi} << 32) | lo) & ((1u << 2) | (1u << 6));
}

TEST(Crc32, IsTheEthernetFcsAndContinuesAcrossPieces) {
  const std::string check = "123456789";
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(check.data()), check.size());
  EXPECT_EQ(ttemu::link::crc32(bytes), 0xCBF43926u);  // CRC-32/ISO-HDLC's check value
  EXPECT_EQ(ttemu::link::crc32(bytes.subspan(4), ttemu::link::crc32(bytes.first(4))), 0xCBF43926u);
}

// ISA-L's AVX-512 kernel returns with the upper halves in use, and every SSE instruction after
// it then waits on them (a third of a UDP link's goodput, two thirds of a shm link's). Shown
// here beside ours, so that the test says so when this CPU's ISA-L kernel uses no wide vectors.
TEST(Crc32, LeavesNoVectorRegisterUpperHalvesInUse) {
  if (!can_read_xinuse()) GTEST_SKIP() << "this CPU cannot tell which vector state is in use";
  const std::vector<uint8_t> p = frame_payload();
  volatile uint32_t sink = crc32_gzip_refl(0, p.data(), p.size());
  const uint64_t after_isal = upper_halves_in_use();
  sink = ttemu::link::crc32(p);
  const uint64_t after_ours = upper_halves_in_use();
  (void)sink;
  EXPECT_EQ(after_ours, 0u) << "ttemu::link::crc32 left the vector upper halves in use";
  if (after_isal == 0) GTEST_SKIP() << "this CPU's ISA-L CRC kernel leaves no upper halves in use";
}

}  // namespace
