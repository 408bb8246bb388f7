// Which chip and core of which running job this process's endpoints are, the way tt-metal's
// tt-run binds MPI ranks: a node string naming a chip ("M0D3"), else $TTEMU_CHIP (set by
// `ttemu run --chip`), else the rank-binding file $TTEMU_RANK_BINDING and the process's MPI
// rank ($OMPI_COMM_WORLD_RANK, $PMIX_RANK, $PMI_RANK or $SLURM_PROCID). The core is
// $TTEMU_CORE, else the file's `core`, else the lowest core no earlier rank of the file holds on
// that chip; a core nobody named is only where the search for a free one starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ttemu::fi {

struct Binding {
  uint16_t mesh = 0, device = 0;
  uint16_t core = 0;
  bool core_given = false;  // named by $TTEMU_CORE or the file: that core or none
  std::string chip() const;  // "M0D3"
};

// "M0D3" (also "m0d3"); nullopt for anything else.
std::optional<Binding> parse_chip(const std::string& s);
// The binding, or nullopt with a one-line reason in *why.
std::optional<Binding> resolve_binding(const char* node, std::string* why);

}  // namespace ttemu::fi
