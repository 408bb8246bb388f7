#include "emulator/control/table_json.hpp"


#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"

namespace ttemu::control {

using nlohmann::json;

namespace {

json entry(std::optional<uint8_t> port) { return port ? json(*port) : json(nullptr); }

int max_mesh_id(const System& sys) { return sys.meshes.empty() ? 0 : sys.meshes.back().id; }

}  // namespace

json router_to_json(const System& sys, const TableSet& tables, int plane, int node) {
  const Chip& chip = sys.chips.at(static_cast<size_t>(node));
  const auto& t = tables.at(plane, node);
  json l0 = json::array(), l1 = json::array();
  for (int d = 0; d < sys.mesh_of(node).chips.size(); ++d) l0.push_back(entry(t.l0(static_cast<uint16_t>(d))));
  for (int m = 0; m <= max_mesh_id(sys); ++m) l1.push_back(entry(t.l1(static_cast<uint16_t>(m))));
  return json{{"device", routing::to_string(chip.id)}, {"plane", plane}, {"l0", l0}, {"l1", l1}};
}

json tables_to_json(const System& sys, const TableSet& tables, std::optional<int> plane,
                    std::optional<int> node) {
  json routers = json::array();
  for (int p = 0; p < tables.planes(); ++p) {
    if (plane && *plane != p) continue;
    for (int v = 0; v < sys.node_count(); ++v) {
      if (node && *node != v) continue;
      routers.push_back(router_to_json(sys, tables, p, v));
    }
  }
  return json{{"system", sys.source}, {"planes", tables.planes()}, {"routers", routers}};
}

TableSet tables_from_json(const System& sys, const json& doc, const std::string& source) {
  auto fail = [&](const std::string& what) { throw Error(fmt::format("{}: {}", source, what)); };
  if (!doc.is_object() || !doc.contains("routers") || !doc["routers"].is_array()) {
    fail("expected an object with a \"routers\" list (as 'ttemu topo tables --json' writes)");
  }
  TableSet tables(sys.planes, sys.node_count());
  size_t index = 0;
  for (const auto& r : doc["routers"]) {
    std::string where = fmt::format("routers[{}]", index++);
    if (!r.is_object() || !r.contains("device") || !r["device"].is_string() ||
        !r.contains("plane") || !r["plane"].is_number_integer()) {
      fail(where + ": needs \"device\" (like \"M0D1\") and \"plane\"");
    }
    auto chip = routing::parse_chip(r["device"].get<std::string>());
    auto node = chip ? sys.node(*chip) : std::nullopt;
    if (!node) fail(fmt::format("{}: device '{}' is not in {}", where, r["device"].get<std::string>(), sys.source));
    if (r["plane"].is_number_unsigned() ? r["plane"].get<uint64_t>() >= static_cast<uint64_t>(sys.planes)
                                         : r["plane"].get<int64_t>() < 0 || r["plane"].get<int64_t>() >= sys.planes) {
      fail(fmt::format("{}: plane {} out of range (the system has {})", where, r["plane"].dump(), sys.planes));
    }
    const int plane = r["plane"].get<int>();
    where += " (" + routing::to_string(*chip) + " plane " + std::to_string(plane) + ")";
    auto& table = tables.at(plane, *node);
    for (const char* level : {"l0", "l1"}) {
      if (!r.contains(level)) continue;
      const json& list = r[level];
      size_t limit = level[1] == '0' ? static_cast<size_t>(sys.mesh_of(*node).chips.size())
                                     : static_cast<size_t>(routing::kMaxMeshes);
      if (!list.is_array() || list.size() > limit) {
        fail(fmt::format("{}: {} must be a list of at most {} entries", where, level, limit));
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const json& v = list[i];
        std::optional<uint8_t> port;
        if (!v.is_null()) {
          if (!v.is_number_integer() || v.get<long>() < 0 || v.get<long>() >= routing::kMaxPorts) {
            fail(fmt::format("{}: {}[{}] is {}; an entry is a port 0-15 or null", where, level, i, v.dump()));
          }
          port = static_cast<uint8_t>(v.get<int>());
        }
        if (level[1] == '0') table.set_l0(static_cast<uint16_t>(i), port);
        else table.set_l1(static_cast<uint16_t>(i), port);
      }
    }
  }
  return tables;
}

TableSet load_tables_json(const System& sys, const std::string& path) {
  json doc = json::parse(read_text_file(path), nullptr, false);
  if (doc.is_discarded()) throw Error(fmt::format("{}: not valid JSON", path));
  return tables_from_json(sys, doc, path);
}

}  // namespace ttemu::control
