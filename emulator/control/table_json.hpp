// Routing tables as JSON (spec 6.1: serialise the intra- and inter-mesh tables):
//   {"system": "<file>", "planes": P, "routers": [{"device": "M0D1", "plane": 0,
//                              "l0": [port|null per device of the mesh],
//                              "l1": [port|null per mesh id]}]}
// Reading checks everything against the system and throws ttemu::Error naming the culprit.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"

namespace ttemu::control {

nlohmann::json router_to_json(const System& sys, const TableSet& tables, int plane, int node);
nlohmann::json tables_to_json(const System& sys, const TableSet& tables,
                              std::optional<int> plane = std::nullopt,
                              std::optional<int> node = std::nullopt);
TableSet tables_from_json(const System& sys, const nlohmann::json& doc, const std::string& source);
// Reads such a JSON file; errors name the file.
TableSet load_tables_json(const System& sys, const std::string& path);

}  // namespace ttemu::control
