// A rank-binding file: which chip (and core) each MPI rank of a program is bound to, the way
// tt-metal's tt-run binds ranks to meshes. One home for the format, read by the libfabric
// provider (a rank finding its chip) and by `ttemu mpirun --rank-binding` (placing each rank on
// the host of its chip):
//   rank_bindings:
//     - {rank: 0, chip: M0D0}
//     - {rank: 1, chip: M0D5, core: 2}
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ttemu::job {

struct RankBindingEntry {
  int rank = -1;
  std::string chip;         // as written ("M0D5"); the reader checks it names a chip
  std::optional<int> core;  // absent: the lowest free one (libfabric_tt/prov/binding.hpp)
};

// The file's entries in their order. Throws ttemu::Error naming the file and what is wrong: no
// `rank_bindings` list, an entry without a rank or chip, a rank given twice, a core out of
// 0..65535.
std::vector<RankBindingEntry> read_rank_binding(const std::string& path);

}  // namespace ttemu::job
