#include "emulator/job/rank_binding.hpp"

#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"

namespace ttemu::job {

std::vector<RankBindingEntry> read_rank_binding(const std::string& path) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
  const YAML::Node list = doc["rank_bindings"];
  if (!list || !list.IsSequence()) throw Error(fmt::format("{}: no 'rank_bindings' list", path));
  std::vector<RankBindingEntry> out;
  std::set<int> ranks;
  for (const auto& e : list) {
    RankBindingEntry entry;
    try {
      entry.rank = e["rank"].as<int>(-1);
      entry.chip = e["chip"].as<std::string>("");
      if (e["core"]) entry.core = e["core"].as<int>();
    } catch (const std::exception&) {
      throw Error(fmt::format("{}: entry {}: rank and core are numbers, chip a name like M0D3", path, out.size()));
    }
    if (entry.rank < 0 || entry.chip.empty()) throw Error(fmt::format("{}: entry {} needs a rank (0 or more) and a chip", path, out.size()));
    if (!ranks.insert(entry.rank).second) throw Error(fmt::format("{}: rank {} is bound twice", path, entry.rank));
    if (entry.core && (*entry.core < 0 || *entry.core > 65535)) throw Error(fmt::format("{}: rank {}: core {} is out of range", path, entry.rank, *entry.core));
    out.push_back(entry);
  }
  return out;
}

}  // namespace ttemu::job
