// Swarm schedules and shrinking (tools/campaign): a seed is a schedule, a schedule is what
// ttemu sim is told, and shrinking finds the fault that matters.
#include <gtest/gtest.h>

#include <set>

#include "emulator/control/system_yaml.hpp"
#include "emulator/link/fault_plan.hpp"
#include "tools/campaign/shrink.hpp"
#include "tools/campaign/swarm.hpp"
#include "tools/campaign/verdict.hpp"

namespace ttemu::tools {
namespace {

using Kind = Fault::Kind;

control::System galaxy() { return control::load_system(std::string(TTEMU_TOPOLOGIES) + "/galaxy.yaml"); }

TEST(Swarm, ASeedIsASchedule) {
  const control::System sys = galaxy();
  const SwarmSpec spec{.faults = 6, .kinds = {}, .span_ms = 10};
  std::set<std::string> plane0;
  for (const auto& l : sys.links) {
    if (l.plane == 0) plane0.insert({routing::to_string(l.a), routing::to_string(l.b)});
  }
  std::set<std::vector<std::string>> different;
  std::set<Kind> kinds;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const auto schedule = draw_schedule(spec, sys, seed);
    EXPECT_EQ(schedule, draw_schedule(spec, sys, seed)) << "seed " << seed;
    ASSERT_FALSE(schedule.empty());
    EXPECT_LE(schedule.size(), 6u);
    std::vector<std::string> words;
    for (const Fault& f : schedule) {
      words.push_back(describe(f));
      kinds.insert(f.kind);
      if (f.kind != Kind::kKill) {
        EXPECT_TRUE(plane0.count(f.where)) << describe(f) << ": not a port of plane 0's links";
      }
      if (f.kind == Kind::kCut || f.kind == Kind::kKill) {
        EXPECT_LE(f.at_ms, 10.0) << describe(f);
      }
    }
    different.insert(words);
  }
  EXPECT_GT(different.size(), 30u) << "seeds draw different schedules";
  EXPECT_EQ(kinds.size(), 6u) << "every kind of fault is drawn";
  const SwarmSpec cuts_only{.faults = 3, .kinds = {Kind::kCut}, .span_ms = 10};
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (const Fault& f : draw_schedule(cuts_only, sys, seed)) EXPECT_EQ(f.kind, Kind::kCut) << describe(f);
  }
}

TEST(Swarm, AScheduleIsWhatTtemuSimIsTold) {
  const control::System sys = galaxy();
  const std::vector<Fault> schedule{{Kind::kCorrupt, "M0D0P4", 0.002, 0, 0},
                                    {Kind::kBurst, "M0D1P4", 0.001, 0, 0},
                                    {Kind::kDelay, "M0D0P4", 30, 0, 0},
                                    {Kind::kCut, "M0D0P5", 0, 1.5, 2.2},
                                    {Kind::kKill, "M0D3", 0, 2, 10},
                                    {Kind::kKill, "M0D4", 0, 3, 0}};
  const SimFaults s = sim_faults(schedule);
  EXPECT_EQ(s.cuts, std::vector<std::string>{"M0D0P5@1.5-3.7"});
  EXPECT_EQ(s.kills, (std::vector<std::string>{"M0D3@2", "M0D4@3"}));
  EXPECT_EQ(s.restarts, std::vector<std::string>{"M0D3@12"});
  const link::FaultPlan plan = link::parse_fault_plan(s.plan_yaml, "swarm", sys.wiring());
  const auto m0d0p4 = *routing::parse_port("M0D0P4"), m0d1p4 = *routing::parse_port("M0D1P4");
  ASSERT_TRUE(plan.tx.count(m0d0p4)) << s.plan_yaml;
  EXPECT_DOUBLE_EQ(plan.tx.at(m0d0p4).corrupt, 0.002);
  EXPECT_EQ(plan.tx.at(m0d0p4).delay, std::chrono::microseconds(30));
  ASSERT_TRUE(plan.tx.count(m0d1p4)) << s.plan_yaml;
  EXPECT_DOUBLE_EQ(plan.tx.at(m0d1p4).burst.enter_bad, 0.001);
  EXPECT_EQ(sim_faults({}).plan_yaml, "") << "no faults, no plan";
}

TEST(Shrink, FindsTheFaultThatMattersAndTheShortestWorkload) {
  const Fault culprit{Kind::kCorrupt, "M0D1P6", 0.01, 0, 0};
  std::vector<Fault> schedule;
  for (int i = 0; i < 7; ++i) schedule.push_back({Kind::kDrop, "M0D0P" + std::to_string(i), 0.001, 0, 0});
  schedule.insert(schedule.begin() + 5, culprit);
  // It fails when the culprit is there and at least 3 writes go per pair.
  const StillFails fails = [&](const std::vector<Fault>& s, uint32_t count) {
    return count >= 3 && std::find(s.begin(), s.end(), culprit) != s.end();
  };
  const Shrunk s = shrink(schedule, 16, fails);
  EXPECT_EQ(s.schedule, std::vector<Fault>{culprit});
  EXPECT_EQ(s.count, 4u) << "16, 8, 4 fail; 2 does not";
  EXPECT_LE(s.tries, 48);
}

TEST(Shrink, SimplifiesCutsAndKillsAndKeepsToItsBudget) {
  const StillFails always = [](const std::vector<Fault>&, uint32_t) { return true; };
  EXPECT_TRUE(shrink({{Kind::kCut, "M0D0P4", 0, 1, 40}}, 8, always).schedule.empty()) << "a failure with no fault at all";
  // A cut that must last 5 ms or more, and a kill whose restart does not matter.
  const StillFails long_cut = [](const std::vector<Fault>& s, uint32_t) {
    return std::any_of(s.begin(), s.end(), [](const Fault& f) { return f.kind == Kind::kCut && f.for_ms >= 5; }) &&
           std::any_of(s.begin(), s.end(), [](const Fault& f) { return f.kind == Kind::kKill; });
  };
  const Shrunk s = shrink({{Kind::kCut, "M0D0P4", 0, 1, 40}, {Kind::kKill, "M0D2", 0, 2, 9}}, 1, long_cut);
  ASSERT_EQ(s.schedule.size(), 2u);
  EXPECT_EQ(s.schedule[0].for_ms, 5) << "40, 20, 10, 5 fail; 2.5 does not";
  EXPECT_EQ(s.schedule[1].for_ms, 0) << "the restart is not needed";
  const Shrunk capped = shrink({{Kind::kDrop, "M0D0P4", 0.1, 0, 0}, {Kind::kDrop, "M0D0P5", 0.1, 0, 0}}, 64, always, 3);
  EXPECT_EQ(capped.tries, 3);
}

// Writes that stay NACKed after the retries fail a run, unless the control plane's last tables
// left pairs unreachable (two dead chips can cut a third off: NACKs are then the right answer).
TEST(Verdict, RetriedWritesMustLandUnlessTheTablesLeftPairsUnreachable) {
  const nlohmann::json result{{"pattern", "all_to_all"}, {"bytes", 100}, {"verified", 60}, {"unverified", 40},
                              {"dead_pair_bytes", 0}, {"nacks", 3}, {"errors", 0}};
  Scenario s;
  s.nacks_allowed = true;
  auto reload = [](int unreachable) {
    return nlohmann::json{{"kind", "tables_reloaded"}, {"unreachable_pairs", unreachable}};
  };
  const Verdict all_reachable = judge(s, 3, 0, false, {result}, {reload(20), reload(0)}, "");
  EXPECT_FALSE(all_reachable.pass);
  EXPECT_EQ(all_reachable.invariant, "retried_writes_land");
  EXPECT_TRUE(judge(s, 3, 0, false, {result}, {reload(0), reload(20)}, "").pass) << "the last tables left 20 pairs unreachable";
  EXPECT_EQ(judge(s, 3, 0, false, {result}, {reload(20)}, "", {"/dev/shm/x"}).invariant, "nothing_left_behind");
}

// Spec 5.4 and 5.5 as the verdict judges them from the event log.
// Atomics and read-backs: a counter that differs from its acknowledged increments, bytes read
// back that differ from what was written, and reads never answered each fail the run.
TEST(Verdict, AtomicCountersAndReadBacksAreJudged) {
  const nlohmann::json clean{{"pattern", "all_to_all"}, {"bytes", 100}, {"verified", 100}, {"unverified", 0},
                             {"dead_pair_bytes", 0}, {"nacks", 0}, {"errors", 0}, {"atomic_errors", 0},
                             {"read_errors", 0}, {"reads_unanswered", 0}};
  const Scenario s;
  EXPECT_TRUE(judge(s, 0, 0, false, {clean}, {}, "").pass);
  auto with = [&](const char* key, int n) {
    nlohmann::json r = clean;
    r[key] = n;
    return judge(s, 0, 0, false, {r}, {}, "");
  };
  EXPECT_EQ(with("atomic_errors", 1).invariant, "atomic_counters");
  EXPECT_EQ(with("read_errors", 4096).invariant, "reads_return_what_was_written");
  const Verdict silent = with("reads_unanswered", 2);
  EXPECT_EQ(silent.invariant, "never_silent");
  EXPECT_NE(silent.reason.find("2 read(s)"), std::string::npos) << silent.reason;
}

// An acknowledged write that is not found is named in the reason: which pair, which write.
TEST(Verdict, ALostWriteIsNamed) {
  const nlohmann::json lost{{"pattern", "all_to_all"}, {"bytes", 100}, {"verified", 96}, {"unverified", 0},
                            {"dead_pair_bytes", 0}, {"nacks", 0}, {"errors", 4}, {"error_writes", {"M0D0->M0D10 #2"}}};
  const Verdict v = judge(Scenario{}, 0, 0, false, {lost}, {}, "");
  EXPECT_EQ(v.invariant, "no_acknowledged_write_lost");
  EXPECT_NE(v.reason.find("M0D0->M0D10 #2"), std::string::npos) << v.reason;
}

TEST(Verdict, TtlRunsOutOnlyInALoopAndALoopOrAStallPastTheTimeoutDropsSomething) {
  const nlohmann::json result{{"pattern", "all_to_all"}, {"bytes", 100}, {"verified", 100}, {"unverified", 0},
                              {"dead_pair_bytes", 0}, {"nacks", 3}, {"errors", 0}};
  auto dropped = [](const char* reason, const char* dst) {
    return nlohmann::json{{"kind", "dropped"}, {"reason", reason}, {"chip", "M0D1"}, {"src", "M0D0"}, {"dst", dst}};
  };
  Scenario none;
  none.nacks_allowed = true;
  const Verdict stray = judge(none, 3, 0, false, {result}, {dropped("ttl_expired", "M0D3")}, "");
  EXPECT_FALSE(stray.pass) << "TTL ran out where no loop was made";
  EXPECT_EQ(stray.invariant, "ttl_loops_dropped");
  EXPECT_TRUE(judge(none, 3, 0, false, {result}, {}, "").pass) << "nothing to say when no TTL ran out";

  Scenario loop;
  loop.loops = {"m0d0:m0d3@0-3500"};  // (names as a user may spell them)
  EXPECT_TRUE(judge(loop, 3, 0, false, {result}, {dropped("ttl_expired", "M0D3")}, "").pass);
  EXPECT_TRUE(judge(loop, 3, 0, false, {result}, {dropped("timeout", "M0D3")}, "").pass) << "a loop whose buffers filled in a cycle";
  EXPECT_EQ(judge(loop, 3, 0, false, {result}, {dropped("ttl_expired", "M0D2")}, "").invariant, "ttl_loops_dropped")
      << "another destination's TTL ran out";
  const Verdict uncaught = judge(loop, 3, 0, false, {result}, {dropped("timeout", "M0D2")}, "");
  EXPECT_EQ(uncaught.invariant, "ttl_loops_dropped") << "a loop longer than the timeout that nothing caught";
  loop.loops = {"M0D0:M0D3@0-500"};
  EXPECT_TRUE(judge(loop, 3, 0, false, {result}, {}, "").pass) << "a loop repaired before the timeout may go unseen";

  Scenario stall;
  stall.stalls = {"M0D3:0@0-3500"};
  const Verdict missed = judge(stall, 3, 0, false, {result}, {}, "");
  EXPECT_EQ(missed.invariant, "timeouts_detected");
  EXPECT_NE(missed.reason.find("M0D3"), std::string::npos) << missed.reason;
  EXPECT_TRUE(judge(stall, 3, 0, false, {result}, {dropped("timeout", "M0D3")}, "").pass) << "NACKs are allowed with a stall";
  stall.stalls = {"M0D3:0@0-50"};
  EXPECT_TRUE(judge(stall, 3, 0, false, {result}, {}, "").pass) << "shorter than the timeout";
}

}  // namespace
}  // namespace ttemu::tools
