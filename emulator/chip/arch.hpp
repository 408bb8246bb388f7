// What a chip of each architecture holds (spec 8.1 and public Wormhole/Blackhole figures):
// Tensix worker cores and ethernet cores with their L1 sizes, and DRAM. Each ethernet core
// serves the ethernet port of the same number and runs that port's fabric router.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ttemu::chip {

struct ArchSpec {
  std::string name;
  int tensix_cores = 0;
  size_t tensix_l1 = 0;  // bytes per Tensix core
  int eth_cores = 0;
  size_t eth_l1 = 0;     // bytes per ethernet core
  size_t dram = 0;       // bytes

  size_t l1_total() const { return static_cast<size_t>(tensix_cores) * tensix_l1 + static_cast<size_t>(eth_cores) * eth_l1; }
  size_t eth_l1_offset(int core) const {
    return static_cast<size_t>(tensix_cores) * tensix_l1 + static_cast<size_t>(core) * eth_l1;
  }
};

// Throws ttemu::Error for an unknown architecture name.
ArchSpec arch_spec(const std::string& arch);

}  // namespace ttemu::chip
