// The tt libfabric provider (libfabric_tt/prov) under unmodified clients, for real: Debian's
// fi_info and fi_pingpong (libfabric-bin) and Open MPI (openmpi-bin), against live systems,
// every byte checked by the clients themselves. A client whose package is not installed is
// skipped with a message (tools/dev installs them, so CI runs them all).
#include <unistd.h>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "emulator/common/free_port.hpp"
#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

bool installed(const std::string& program) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/local/bin/"}) {
    if (access((std::string(dir) + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

#define REQUIRE_PROGRAM(p)                                                                        \
  if (!installed(p)) GTEST_SKIP() << p << " is not installed (bash tools/dev test installs it)"


// fi_pingpong's server on one chip and its client on another, both started by `ttemu run`
// inside a launched system; the client waits until the server listens (a deadline, no sleep).
RunResult pingpong(const std::string& system, const std::string& server, const std::string& client,
                   const std::string& args) {
  TempFile script(fmt::format(R"SH(set -u
T={0}
port={1}
"$T" run --chip {2} -- fi_pingpong -p tt -B $port {4} > server.log 2>&1 &
server=$!
for i in $(seq 1 600); do
  ss -Hltn "sport = :$port" | grep -q . && break
  kill -0 $server 2>/dev/null || break
  read -t 0.05 < /dev/zero 2>/dev/null || true
done
"$T" run --chip {3} -- fi_pingpong -p tt -P $port {4} 127.0.0.1
client=$?
wait $server
status=$?
echo "== server (exit $status)"
cat server.log
exit $(( client != 0 ? client : status ))
)SH",
                                          TTEMU_BINARY, free_tcp_port(), server, client, args));
  TempDir dir;
  return run({"/bin/bash", "-c", fmt::format("cd {} && exec {} launch {} -- /bin/bash {}", dir.path().string(), TTEMU_BINARY,
                                             topo(system), script.path())});
}

void expect_pingpong_passed(const RunResult& r, const std::string& largest) {
  ASSERT_EQ(r.status, 0) << r.out;
  // Both sides printed a row per size, every message acknowledged (`=` in the #ack column).
  const auto rows = lines_with(r.stdout_text, "=10 ");
  EXPECT_FALSE(rows.empty()) << r.out;
  bool saw_largest = false;
  for (const auto& row : rows) saw_largest = saw_largest || row.rfind(largest + " ", 0) == 0;
  EXPECT_TRUE(saw_largest) << "no row for " << largest << ":\n" << r.out;
  EXPECT_EQ(r.out.find("Error at iteration"), std::string::npos) << r.out;
}

TEST(Libfabric, FiInfoListsTheProviderItsEndpointTypesAndCapabilities) {
  REQUIRE_PROGRAM("fi_info");
  RunResult r = run({"/usr/bin/env", std::string("FI_PROVIDER_PATH=") + TTEMU_PROVIDER_DIR, "fi_info", "-p", "tt", "-v"});
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* want : {"prov_name: tt", "type: FI_EP_RDM", "type: FI_EP_DGRAM", "FI_TAGGED", "FI_RMA", "FI_ATOMIC",
                           "FI_DIRECTED_RECV", "FI_THREAD_SAFE", "FI_PROGRESS_MANUAL", "mr_mode: [ FI_MR_PROV_KEY ]"}) {
    EXPECT_NE(r.stdout_text.find(want), std::string::npos) << want << " missing:\n" << r.stdout_text;
  }
  // Reliability is the fabric's: libfabric's ofi_rxd does not layer over these endpoints.
  EXPECT_EQ(r.stdout_text.find("ofi_rxd"), std::string::npos) << r.stdout_text;
  // No prefix matching: asking for tcp, udp, shm or sockets never yields tt, nor tt any of them.
  for (const char* other : {"tcp", "udp", "shm", "sockets"}) {
    RunResult o = run({"/usr/bin/env", std::string("FI_PROVIDER_PATH=") + TTEMU_PROVIDER_DIR, "fi_info", "-p", other});
    EXPECT_TRUE(lines_with(o.stdout_text, "provider: tt").empty()) << other << ":\n" << o.stdout_text;
  }
  EXPECT_EQ(lines_with(r.stdout_text, "provider: ").size(), lines_with(r.stdout_text, "provider: tt").size()) << r.stdout_text;
}

// RDM, messages and tagged messages, every size fi_pingpong has ("-S all", to 6 MiB), from
// M0D0 to M0D15 of a 4x4 mesh: six hops.
TEST(Libfabric, FiPingpongRdmEverySizeWithItsDataCheckOverSixHops) {
  REQUIRE_PROGRAM("fi_pingpong");
  expect_pingpong_passed(pingpong("mesh_4x4.yaml", "M0D0", "M0D15", "-e rdm -c -S all"), "6m");
  expect_pingpong_passed(pingpong("mesh_4x4.yaml", "M0D0", "M0D15", "-e rdm -m tagged -c -S all"), "6m");
}

// DGRAM: every size up to the endpoint's largest message (64 KiB), one hop.
TEST(Libfabric, FiPingpongDgramEverySizeWithItsDataCheck) {
  REQUIRE_PROGRAM("fi_pingpong");
  expect_pingpong_passed(pingpong("n300.yaml", "M0D0", "M0D1", "-e dgram -c -S all"), "64k");
}

// Open MPI 4.1 over the provider (pml cm, mtl ofi): four ranks on Galaxy chips, two of them on
// one chip (cores 0 and 1), the others hops away; tests/mpi/mpi_fabric_check.c checks every
// byte of point-to-point (to 8 MiB, MPI_Ssend included), MPI_Allreduce and MPI_Alltoall.
TEST(Libfabric, OpenMpiPointToPointAllreduceAndAlltoallAcrossGalaxyChips) {
  REQUIRE_PROGRAM("mpirun");
  if (std::string(TTEMU_MPI_CHECK).empty()) GTEST_SKIP() << "mpi_fabric_check was not built (no MPI compiler at configure time)";
  TempFile bindings("rank_bindings:\n  - {rank: 0, chip: M0D0}\n  - {rank: 1, chip: M0D0}\n  - {rank: 2, chip: M0D13}\n"
                    "  - {rank: 3, chip: M0D31}\n");
  const std::string root = geteuid() == 0 ? "--allow-run-as-root " : "";
  RunResult r = run({"/bin/bash", "-c",
                     fmt::format("{0} launch {1} -- {0} run --rank-binding {2} -- mpirun {3}-np 4 --oversubscribe --mca pml cm "
                                 "--mca mtl ofi --mca mtl_ofi_provider_include tt --mca btl self {4}",
                                 TTEMU_BINARY, topo("galaxy.yaml"), bindings.path(), root, TTEMU_MPI_CHECK)});
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* want : {"point-to-point MPI_Send: 0 B to 8 MiB verified", "point-to-point MPI_Ssend: 0 B to 8 MiB verified",
                           "point-to-point MPI_Isend: 0 B to 8 MiB verified", "MPI_Allreduce: 100000 int64 summed over 4 ranks",
                           "MPI_Alltoall: 4096 int32 per pair over 4 ranks", "mpi_fabric_check: OK"}) {
    EXPECT_NE(r.stdout_text.find(want), std::string::npos) << want << ":\n" << r.out;
  }
}

// RMA, atomics and permission errors through the provider (tests/fi_client.cpp) in a system
// whose memory is protected: a wrong key, a write running out of its window (ten packets, the
// first seven inside) and a write to a read-only window each fail with FI_EACCES and change no
// byte. And messaging cases: two senders' 3 MiB messages interleaving in one receiver,
// truncation, cancel, counters and injects, two endpoints of one chip on cores of their own.
TEST(Libfabric, RmaAtomicsPermissionErrorsAndMessagingCasesThroughTheProvider) {
  RunResult r = run({TTEMU_BINARY, "launch", topo("n300.yaml"), "--memory", "protected", "--", TTEMU_FI_CLIENT});
  expect_client_passed(r, {"FiRma.AWriteLandsByteForByteAndReadsBack", "FiRma.AWrongKeyFailsWithEaccesAndChangesNothing",
                           "FiRma.AWriteOutsideTheWindowFailsWithEaccesAndChangesNothing",
                           "FiRma.AReadOnlyWindowWrittenFailsWithEaccesAndChangesNothing", "FiRma.AtomicsAddAndFetchOnTheFabric",
                           "FiRma.AddressesNameTheChipCoreAndEndpoint", "FiRma.WhatDoesNotMapIsRefusedByName",
                           "FiMsg.TwoEndpointsOfOneChipHoldCoresOfTheirOwn", "FiMsg.TwoSendersInterleaveLargeMessagesByteForByte",
                           "FiMsg.ATruncatedReceiveFailsWithEtruncAndSaysHowMuchDidNotFit",
                           "FiMsg.ACancelledReceiveCompletesWithEcanceled",
                           "FiMsg.InjectsCountWithoutCompletingAndSendmsgWithFiInjectCompletes"});
}

// A process bound to no chip is told how to bind (libfabric's log, FI_LOG_LEVEL=warn).
TEST(Libfabric, AnUnboundProcessIsToldHowToBind) {
  REQUIRE_PROGRAM("fi_info");
  RunResult r = run({"/usr/bin/env", "-u", "TTEMU_CHIP", "-u", "TTEMU_RANK_BINDING", std::string("FI_PROVIDER_PATH=") + TTEMU_PROVIDER_DIR,
                     "FI_LOG_LEVEL=warn", "fi_info", "-p", "tt"});
  EXPECT_NE(r.stderr_text.find("not bound to a chip: set TTEMU_CHIP (ttemu run --chip M0D3 -- CMD)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ttemu::test
