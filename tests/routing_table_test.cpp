#include "emulator/routing/routing_table.hpp"

#include <gtest/gtest.h>

#include "emulator/common/error.hpp"

namespace ttemu::routing {
namespace {

TEST(RouterTable, StartsWithNoRoutes) {
  RouterTable t;
  EXPECT_FALSE(t.l0(0));
  EXPECT_FALSE(t.l0(1023));
  EXPECT_FALSE(t.l1(1023));
}

TEST(RouterTable, PacksFourBitEntriesAsTheSpecLaysThemOut) {
  RouterTable t;
  t.set_l0(0, 2);
  t.set_l0(1, 15);
  t.set_l0(1023, 7);
  t.set_l1(4, 9);
  t.set_l1(5, 0);
  PackedRouterTable p = t.pack();
  EXPECT_EQ(p.l0[0], 0xF2) << "device 0 in the low nibble, device 1 in the high nibble";
  EXPECT_EQ(p.l0[511], 0x70);
  EXPECT_EQ(p.l1[2], 0x09) << "mesh 4 low nibble = 9, mesh 5 high nibble = port 0";
  EXPECT_EQ(p.l0_valid[0], 0x03);
  EXPECT_EQ(p.l0_valid[127], 0x80);
  EXPECT_EQ(p.l1_valid[0], 0x30) << "port 0 of mesh 5 is a route, told apart by the bitmap";
  EXPECT_EQ(p.l0[1], 0x00);
  EXPECT_EQ(p.l0_valid[1], 0x00);
}

TEST(RouterTable, UnpackInvertsPack) {
  RouterTable t;
  for (uint16_t i = 0; i < 1024; i += 3) t.set_l0(i, static_cast<uint8_t>(i % 16));
  for (uint16_t i = 1; i < 1024; i += 7) t.set_l1(i, static_cast<uint8_t>((i * 5) % 16));
  EXPECT_EQ(RouterTable::unpack(t.pack()), t);
}

TEST(RouterTable, RejectsPortsThatDoNotFitFourBits) {
  RouterTable t;
  EXPECT_THROW(t.set_l0(0, 16), Error);
  EXPECT_FALSE(t.l0(0)) << "a rejected entry writes nothing";
}

TEST(NextHop, DeliversLocallyUsesL0InsideTheMeshAndL1Across) {
  RouterTable t;
  t.set_l0(8, 2);
  t.set_l1(3, 11);
  EXPECT_EQ(next_hop(t, {0, 5}, {0, 5}).kind, NextHop::kDeliver);
  auto intra = next_hop(t, {0, 5}, {0, 8});
  EXPECT_EQ(intra.kind, NextHop::kForward);
  EXPECT_EQ(intra.port, 2);
  auto inter = next_hop(t, {0, 5}, {3, 8});
  EXPECT_EQ(inter.kind, NextHop::kForward);
  EXPECT_EQ(inter.port, 11) << "another mesh: L1 by mesh id, whatever the device";
  EXPECT_EQ(next_hop(t, {0, 5}, {0, 7}).kind, NextHop::kNoRoute);
  EXPECT_EQ(next_hop(t, {0, 5}, {2, 0}).kind, NextHop::kNoRoute);
}

}  // namespace
}  // namespace ttemu::routing
