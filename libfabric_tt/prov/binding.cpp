#include "libfabric_tt/prov/binding.hpp"

#include "emulator/job/rank_binding.hpp"
#include "emulator/routing/address.hpp"

#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

namespace ttemu::fi {

std::string Binding::chip() const { return fmt::format("M{}D{}", mesh, device); }

std::optional<Binding> parse_chip(const std::string& s) {
  const auto chip = routing::parse_chip(s);
  if (!chip) return std::nullopt;
  return Binding{chip->mesh, chip->device, 0, false};
}

namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != 0 || n < 0 || n > 65535) return std::nullopt;
  return static_cast<int>(n);
}

std::optional<int> mpi_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (auto r = env_int(name)) return r;
  }
  return std::nullopt;
}

// The rank's entry of a rank-binding file (job/rank_binding.hpp).
std::optional<Binding> from_file(const std::string& path, int rank, std::string* why) {
  try {
    std::map<std::string, std::set<int>> used;  // cores earlier entries hold, per chip
    for (const auto& e : job::read_rank_binding(path)) {
      const auto chip = parse_chip(e.chip);
      if (!chip) {
        *why = fmt::format("{}: '{}' is not a chip (like M0D3)", path, e.chip);
        return std::nullopt;
      }
      Binding b = *chip;
      auto& held = used[b.chip()];
      int core = 0;
      if (e.core) {
        core = *e.core;
        b.core_given = true;
      } else {
        while (held.count(core)) ++core;
      }
      held.insert(core);
      b.core = static_cast<uint16_t>(core);
      if (e.rank == rank) return b;
    }
    *why = fmt::format("{}: no binding for rank {}", path, rank);
  } catch (const std::exception& e) {
    *why = e.what();
  }
  return std::nullopt;
}

}  // namespace

std::optional<Binding> resolve_binding(const char* node, std::string* why) {
  std::optional<Binding> b;
  if (node && *node) {
    b = parse_chip(node);
    if (!b) {
      *why = fmt::format("'{}' is not a chip of a ttemu system (like M0D3)", node);
      return std::nullopt;
    }
  } else if (const char* chip = std::getenv("TTEMU_CHIP"); chip && *chip) {
    b = parse_chip(chip);
    if (!b) {
      *why = fmt::format("TTEMU_CHIP='{}' is not a chip (like M0D3)", chip);
      return std::nullopt;
    }
  } else if (const char* file = std::getenv("TTEMU_RANK_BINDING"); file && *file) {
    const auto rank = mpi_rank();
    if (!rank) {
      *why = fmt::format("TTEMU_RANK_BINDING={} but no MPI rank in the environment", file);
      return std::nullopt;
    }
    b = from_file(file, *rank, why);
    if (!b) return std::nullopt;
  } else {
    *why = "not bound to a chip: set TTEMU_CHIP (ttemu run --chip M0D3 -- CMD), TTEMU_RANK_BINDING, or name the chip as the node";
    return std::nullopt;
  }
  if (auto core = env_int("TTEMU_CORE")) b->core = static_cast<uint16_t>(*core), b->core_given = true;
  return b;
}

}  // namespace ttemu::fi
