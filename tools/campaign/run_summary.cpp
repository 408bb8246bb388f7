#include "tools/campaign/run_summary.hpp"

namespace ttemu::tools {

nlohmann::json summarise_run(const Scenario&, const std::vector<nlohmann::json>&, const std::vector<nlohmann::json>&) {
  return nlohmann::json::object();
}

}  // namespace ttemu::tools
