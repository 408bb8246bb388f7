#include "tools/campaign/report.hpp"

namespace ttemu::tools {

void write_report(const Campaign&, const std::vector<nlohmann::json>&, const std::filesystem::path&) {}

}  // namespace ttemu::tools
