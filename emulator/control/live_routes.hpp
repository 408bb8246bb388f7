// The live control plane's routing (spec 1.1.2): what the running system has lost, and the
// tables around it. No I/O: the launcher feeds it the link states its chips report and the
// chip deaths it sees; the simulator feeds it the same from its nodes. Both get the same
// decisions.
//
// When a direction has no live link left (every link between two chips is down, or one of
// them died), those links and chips are failures, and new tables are computed around them;
// when the links come back or the chip restarts, tables are computed again without them. A
// link that is down while a parallel link to the same neighbour lives is the Ethernet Fallback
// Channel's (efc.md), not a failure, unless the EFC is off. Operators add failures of their
// own (`ttemu tables reload --fail`, administratively down links).
#pragma once

#include <chrono>
#include <optional>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_check.hpp"
#include "emulator/control/table_set.hpp"

namespace ttemu::control {

// New tables and what was proven about them.
struct Reload {
  int version = 0;  // 1 for the tables the system started with
  TableSet tables;
  Failures failures;
  std::vector<PlaneReport> planes;  // the new tables, checked on each plane
  // The switch: a packet in flight may meet old tables at some routers and new ones at others.
  // Empty when no mix of the two can loop or deadlock; else what can (one line).
  std::string switch_risk;
  // One line: what failed ("M0D0-M0D1 (4 links), chip M0D5").
  std::string summary(const System& sys) const;
  // Ordered pairs of live chips the new tables do not route, summed over the planes.
  long unreachable_pairs() const;
};

class LiveRoutes {
 public:
  // Link states and deaths come in bursts (a dead chip's neighbours, a restarted chip's links
  // coming up one by one): the control plane reloads once, this long after a burst's first
  // news, not a table version per link. The launcher and the simulator wait the same.
  static constexpr std::chrono::milliseconds kSettle{25};

  // `efc`: a down link with a live parallel link is carried by the fallback channel.
  LiveRoutes(const System& sys, TableSet initial, bool efc);

  // An end's TT-link is up (true) or not; a chip is alive or not.
  void link_up(PortId end, bool up);
  void chip_alive(int node, bool alive);
  // A new process for a dead chip: alive, its links down until each comes up.
  void chip_restarted(int node);
  // The operator's failures, on top of what the fabric reported (replaced, not added).
  void set_operator_failures(Failures f) { operator_ = std::move(f); }

  // What routing must go around now.
  Failures failures() const;
  // New tables if failures() differs from what the tables in force were computed for, or a
  // chip died since the last reload (even one back already: packets inside it were lost, and
  // clients' retry mode takes unanswered packets as lost only once the tables changed), or
  // `force`; they are in force from then on.
  std::optional<Reload> reload(bool force = false);
  // News came (a link state, a death): true if it is the first since the last reload, and the
  // caller reloads kSettle from now (one reload per burst of news).
  bool news() { return !std::exchange(reload_due_, true); }

  const TableSet& tables() const { return tables_; }
  int version() const { return version_; }

 private:
  const System& sys_;
  TableSet tables_;
  bool efc_;
  int version_ = 1;
  bool reload_due_ = false;  // news() came since the last reload()
  bool died_ = false;        // a chip died since the last reload()
  Failures in_force_;
  Failures operator_;
  std::vector<std::array<bool, routing::kMaxPorts>> up_;  // by node and port
  std::vector<bool> alive_;
  std::vector<std::vector<int>> directions_;  // the links between each pair of chips
};

// Whether a router may switch from `before` to `after` one at a time while packets are in
// flight: every mix of the two (each router using either) is free of forwarding loops and of
// channel-dependency cycles, around `failures`. Empty when it is; else one line saying why not.
std::string check_switch(const System& sys, const TableSet& before, const TableSet& after, int plane,
                         const Failures& failures);

}  // namespace ttemu::control
