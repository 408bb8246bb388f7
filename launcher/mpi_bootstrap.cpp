#include "launcher/mpi_bootstrap.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI would pull in its C++ bindings)
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "emulator/common/asio.hpp"
#include "emulator/common/error.hpp"

namespace ttemu::launcher {

namespace ip = boost::asio::ip;
using nlohmann::json;

namespace {

constexpr int kEntryBytes = 1024;  // one rank's entry, JSON, NUL-padded

std::vector<char> pack(const json& j) {
  std::string s = j.dump();
  if (s.size() >= kEntryBytes) s = json{{"error", "host entry too long"}}.dump();
  std::vector<char> out(kEntryBytes, '\0');
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

}  // namespace

bool started_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

MpiWorld exchange_through_mpi(const std::function<HostEntry(int rank, int size)>& mine) {
  int argc = 0;
  char** argv = nullptr;
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) throw Error("MPI_Init failed");
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  json entry;
  try {
    HostEntry e = mine(w.rank, w.size);
    entry = {{"address", e.address}, {"control_port", e.control_port}, {"version", e.version}};
  } catch (const std::exception& ex) {
    entry = {{"error", ex.what()}};
  }
  const std::vector<char> out = pack(entry);
  std::vector<char> all(static_cast<size_t>(kEntryBytes) * static_cast<size_t>(w.size));
  const int rc = MPI_Allgather(out.data(), kEntryBytes, MPI_CHAR, all.data(), kEntryBytes, MPI_CHAR, MPI_COMM_WORLD);
  MPI_Finalize();
  if (rc != MPI_SUCCESS) throw Error("MPI_Allgather of the hosts' addresses failed");
  for (int r = 0; r < w.size; ++r) {
    const char* p = all.data() + static_cast<size_t>(r) * kEntryBytes;
    json j = json::parse(std::string(p, strnlen(p, kEntryBytes)), nullptr, false);
    if (!j.is_object()) throw Error(fmt::format("rank {} sent an unreadable host entry", r));
    if (j.contains("error")) throw Error(fmt::format("rank {}: {}", r, j["error"].get<std::string>()));
    w.hosts.push_back({r, j.value("address", ""), j.value("control_port", uint16_t{0}), j.value("version", "")});
  }
  return w;
}

MpiGroup::MpiGroup() {
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw Error("MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiGroup::~MpiGroup() { MPI_Finalize(); }

void MpiGroup::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

uint64_t MpiGroup::sum(uint64_t v) {
  uint64_t out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

double MpiGroup::max(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

std::vector<int> MpiGroup::max(std::vector<int> v) {
  std::vector<int> out(v.size());
  MPI_Allreduce(v.data(), out.data(), static_cast<int>(v.size()), MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

std::vector<std::string> MpiGroup::all(const std::string& mine) {
  const std::vector<char> out = pack(json(mine));
  std::vector<char> every(static_cast<size_t>(kEntryBytes) * static_cast<size_t>(size_));
  MPI_Allgather(out.data(), kEntryBytes, MPI_CHAR, every.data(), kEntryBytes, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> result;
  for (int r = 0; r < size_; ++r) {
    const char* p = every.data() + static_cast<size_t>(r) * kEntryBytes;
    const json j = json::parse(std::string(p, strnlen(p, kEntryBytes)), nullptr, false);
    result.push_back(j.is_string() ? j.get<std::string>() : "");
  }
  return result;
}

std::vector<double> MpiGroup::gather(const std::vector<double>& mine) {
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size_; ++r) offsets[static_cast<size_t>(r)] = total, total += counts[static_cast<size_t>(r)];
  std::vector<double> out(rank_ == 0 ? static_cast<size_t>(total) : 0);
  MPI_Gatherv(mine.data(), n, MPI_DOUBLE, out.data(), counts.data(), offsets.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return rank_ == 0 ? out : mine;
}

std::string local_address(const std::string& network) {
  std::optional<ip::network_v4> net4;
  std::optional<ip::network_v6> net6;
  boost::system::error_code ec;
  if (network.find('/') != std::string::npos) {
    if (network.find(':') != std::string::npos) {
      net6 = ip::make_network_v6(network, ec);
    } else {
      net4 = ip::make_network_v4(network, ec);
    }
    if (ec) throw Error(fmt::format("--network '{}' is neither a CIDR network (10.1.0.0/24, fd00::/64) nor an interface", network));
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw Error("cannot list this host's addresses (getifaddrs)");
  std::string v4, v6;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    const bool named = !net4 && !net6 && !network.empty();
    if (named && network != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET) {
      ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
      const ip::address_v4 a(b);
      if (net6 || (network.empty() && a.is_loopback())) continue;
      if (net4 && !(ip::network_v4(a, net4->prefix_length()).canonical() == net4->canonical())) continue;
      if (v4.empty()) v4 = a.to_string();
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
      const ip::address_v6 a(b);
      if (net4 || a.is_loopback() || a.is_link_local()) continue;
      if (net6 && !(ip::network_v6(a, net6->prefix_length()).canonical() == net6->canonical())) continue;
      if (v6.empty()) v6 = a.to_string();
    }
  }
  ::freeifaddrs(list);
  if (!v4.empty() && !net6) return v4;
  if (!v6.empty() && !network.empty()) return v6;
  if (network.empty()) return "127.0.0.1";
  throw Error(fmt::format("no address of this host is in --network '{}'", network));
}

}  // namespace ttemu::launcher
