#include "emulator/routing/address.hpp"

#include <gtest/gtest.h>

namespace ttemu::routing {
namespace {

TEST(Address, FormatsAsTheSpecNamesThem) {
  EXPECT_EQ(to_string(ChipId{0, 5}), "M0D5");
  EXPECT_EQ(to_string(PortId{ChipId{1, 3}, 4}), "M1D3P4");
}

TEST(Address, ParsesChipsAndPortsCaseInsensitively) {
  EXPECT_EQ(parse_chip("M4D31"), (ChipId{4, 31}));
  EXPECT_EQ(parse_chip("m4d31"), (ChipId{4, 31}));
  EXPECT_EQ(parse_port("M0D5P2"), (PortId{ChipId{0, 5}, 2}));
}

TEST(Address, RejectsMalformedAndOutOfRangeNames) {
  for (const char* bad : {"", "M", "M0", "D0", "M0D", "MxD1", "M0D1 ", "M-1D0", "M1024D0",
                          "M0D1024", "M0D0P16", "M0D0P", "M0D0X1", "M99999999999D0"}) {
    EXPECT_FALSE(parse_chip(bad)) << bad;
    EXPECT_FALSE(parse_port(bad)) << bad;
  }
  EXPECT_FALSE(parse_chip("M0D0P1")) << "a port is not a chip";
  EXPECT_FALSE(parse_port("M0D0")) << "a chip is not a port";
}

}  // namespace
}  // namespace ttemu::routing
