// Where bound chip processes run (`ttemu launch --cpu-bind blocks`): the locality order of a
// host's chips (control/cpu_blocks.hpp) and each chip's share of the CPUs (process/cpu_binding.hpp).
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <random>
#include <set>

#include "emulator/control/cpu_blocks.hpp"
#include "emulator/process/cpu_binding.hpp"
#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

std::vector<int> all_nodes(const control::System& sys) {
  std::vector<int> v(static_cast<size_t>(sys.node_count()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

// The chips of run k of `runs` equal runs of `order`, as (row, col) pairs.
std::set<std::pair<int, int>> run_cells(const control::System& sys, const std::vector<int>& order, size_t k, size_t runs) {
  std::set<std::pair<int, int>> cells;
  const size_t per = order.size() / runs;
  for (size_t i = k * per; i < (k + 1) * per; ++i) {
    const auto& c = sys.chips[static_cast<size_t>(order[i])].coord;
    cells.insert({c.row, c.col});
  }
  return cells;
}

std::set<std::pair<int, int>> block(int row0, int rows, int col0, int cols) {
  std::set<std::pair<int, int>> cells;
  for (int r = row0; r < row0 + rows; ++r) {
    for (int c = col0; c < col0 + cols; ++c) cells.insert({r, c});
  }
  return cells;
}

TEST(LocalityOrder, AGalaxyOnTwoCpusSplitsBetweenColumnsThreeAndFour) {
  const control::System sys = load("galaxy.yaml");
  const auto order = control::locality_order(sys, all_nodes(sys));
  ASSERT_EQ(order.size(), 32u);
  EXPECT_EQ(run_cells(sys, order, 0, 2), block(0, 4, 0, 4));
  EXPECT_EQ(run_cells(sys, order, 1, 2), block(0, 4, 4, 4));
}

TEST(LocalityOrder, RunsOfFourAndEightAreCompactBlocksOfTheMesh) {
  const control::System sys = load("galaxy.yaml");
  const auto order = control::locality_order(sys, all_nodes(sys));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(run_cells(sys, order, static_cast<size_t>(k), 4), block(0, 4, 2 * k, 2)) << "run " << k;
  // Eight runs: 2x2 blocks, the left column of blocks first.
  EXPECT_EQ(run_cells(sys, order, 0, 8), block(0, 2, 0, 2));
  EXPECT_EQ(run_cells(sys, order, 1, 8), block(2, 2, 0, 2));
  EXPECT_EQ(run_cells(sys, order, 7, 8), block(2, 2, 6, 2));
}

TEST(LocalityOrder, EveryChipOnceAMeshAtATimeWhateverTheOrderGiven) {
  const control::System sys = load("tgg.yaml");
  std::vector<int> nodes = all_nodes(sys);
  const auto order = control::locality_order(sys, nodes);
  std::mt19937 rng(7);
  std::shuffle(nodes.begin(), nodes.end(), rng);
  nodes.push_back(nodes.front());  // a node named twice is placed once
  EXPECT_EQ(control::locality_order(sys, nodes), order);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, all_nodes(sys));
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_LE(sys.chips[static_cast<size_t>(order[i - 1])].id.mesh, sys.chips[static_cast<size_t>(order[i])].id.mesh) << i;
  }
}

TEST(CpuShare, MoreChipsThanCpusShareThemInEqualContiguousRuns) {
  const std::vector<int> allowed{0, 2, 5};  // as `taskset -c 0,2,5` leaves them
  std::vector<int> per_cpu(6, 0);
  int last = -1;
  for (size_t rank = 0; rank < 32; ++rank) {
    const auto cpus = process::cpu_share(rank, 32, allowed);
    ASSERT_EQ(cpus.size(), 1u) << rank;
    EXPECT_GE(cpus[0], last) << "runs are contiguous in rank";
    last = cpus[0];
    ++per_cpu[static_cast<size_t>(cpus[0])];
  }
  EXPECT_EQ(per_cpu, (std::vector<int>{11, 0, 11, 0, 0, 10}));
  EXPECT_EQ(process::cpu_share(0, 32, {3, 4}), std::vector<int>{3});
  EXPECT_EQ(process::cpu_share(16, 32, {3, 4}), std::vector<int>{4});
}

TEST(CpuShare, FewerChipsThanCpusEachHaveTheirOwn) {
  const std::vector<int> eight{0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(process::cpu_share(0, 2, eight), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(process::cpu_share(1, 2, eight), (std::vector<int>{4, 5, 6, 7}));
  const std::vector<int> four{0, 1, 2, 3};
  EXPECT_EQ(process::cpu_share(0, 3, four), std::vector<int>{0});
  EXPECT_EQ(process::cpu_share(1, 3, four), std::vector<int>{1});
  EXPECT_EQ(process::cpu_share(2, 3, four), (std::vector<int>{2, 3}));
  EXPECT_EQ(process::cpu_share(0, 1, four), four);
}

TEST(CpuShare, NoCpusOrARankPastTheCountGiveNothing) {
  EXPECT_TRUE(process::cpu_share(0, 4, {}).empty());
  EXPECT_TRUE(process::cpu_share(4, 4, {0, 1}).empty());
}

TEST(CpuListText, RangesAsLinuxPrintsThem) {
  EXPECT_EQ(process::cpu_list_text({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(process::cpu_list_text({3}), "3");
  EXPECT_EQ(process::cpu_list_text({}), "");
}

// Every thread of the process, the ones it has and the ones it starts after, runs under
// SCHED_BATCH (checked in a child, which leaves the test runner as it was).
TEST(Scheduling, AProcessScheduledAsBatchRunsEveryThreadAsBatch) {
  EXPECT_EQ(process::scheduling_of(getpid()), "normal");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A thread that runs already, and looks at its own policy once the process has been set.
    std::atomic<int> set{0}, before_policy{-1};
    std::thread before([&] {
      while (set.load() == 0) std::this_thread::yield();
      before_policy = sched_getscheduler(0);
    });
    bool ok = process::schedule_as_batch().empty() && process::scheduling_of(getpid()) == "batch";
    set = 1;
    before.join();
    int after_policy = -1;
    std::thread after([&] { after_policy = sched_getscheduler(0); });
    after.join();
    _exit(ok && before_policy == SCHED_BATCH && after_policy == SCHED_BATCH ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(process::scheduling_of(child), "") << "a process that is gone has no policy";
}

}  // namespace
}  // namespace ttemu::test
