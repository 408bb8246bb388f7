// How long a launch's chips spin after traffic when --spin-us is not given (launcher/spin_choice.hpp).
#include <gtest/gtest.h>

#include "launcher/spin_choice.hpp"

namespace {

using ttemu::launcher::kAutoSpinUs;
using ttemu::launcher::kSpinAuto;
using ttemu::launcher::resolve_spin_us;

TEST(SpinChoice, ChipsSpinWhenEachHasACpuAndSleepAtOnceWhenTheyMustShare) {
  EXPECT_EQ(resolve_spin_us(kSpinAuto, 2, 2), kAutoSpinUs);   // an n300 on two CPUs
  EXPECT_EQ(resolve_spin_us(kSpinAuto, 1, 8), kAutoSpinUs);   // an n150
  EXPECT_EQ(resolve_spin_us(kSpinAuto, 16, 2), 0);            // a 4x4 mesh on two CPUs: turns, not spins
  EXPECT_EQ(resolve_spin_us(kSpinAuto, 32, 2), 0);            // a Galaxy
}

TEST(SpinChoice, AnExplicitSpinWins) {
  EXPECT_EQ(resolve_spin_us(0, 2, 2), 0);
  EXPECT_EQ(resolve_spin_us(40, 32, 2), 40);
}

}  // namespace
