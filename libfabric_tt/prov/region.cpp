#include "libfabric_tt/prov/region.hpp"

#include "libfabric_tt/prov/mailbox.hpp"
#include "libfabric_tt/tt_fabric_internal.hpp"

namespace ttemu::fi {

std::optional<uint64_t> region_of(tt_fabric* handle) {
  tt_fabric* f = client::lookup(handle);
  if (!f) return std::nullopt;
  const uint64_t below = kDscbArea + (uint64_t{f->core} + 1) * kRegion;
  if (f->dram.size() < below) return std::nullopt;
  return TT_FABRIC_DRAM | (f->dram.size() - below);
}

uint64_t lowest_region(tt_fabric* handle) {
  tt_fabric* f = client::lookup(handle);
  if (!f) return 0;
  const uint64_t below = kDscbArea + static_cast<uint64_t>(f->tensix_cores) * kRegion;
  return f->dram.size() > below ? f->dram.size() - below : 0;
}

}  // namespace ttemu::fi

namespace ttemu::fi {

std::optional<uint64_t> chip_address(tt_fabric* handle, const void* p, size_t len) {
  tt_fabric* f = client::lookup(handle);
  if (!f) return std::nullopt;
  const auto* b = static_cast<const uint8_t*>(p);
  const auto* l1 = f->l1.as<uint8_t>();
  const auto* dram = f->dram.as<uint8_t>();
  if (b >= l1 && b + len <= l1 + f->l1.size()) return static_cast<uint64_t>(b - l1);
  if (b >= dram && b + len <= dram + f->dram.size()) return TT_FABRIC_DRAM | static_cast<uint64_t>(b - dram);
  return std::nullopt;
}

}  // namespace ttemu::fi
