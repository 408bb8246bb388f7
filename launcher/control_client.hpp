// Talking to a running launcher over its control socket: one JSON request, one JSON reply.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ttemu::launcher {

// The control socket of the job named, else of $TTEMU_JOB, else of the only running job.
// Throws ttemu::Error.
std::string find_control_socket(const std::optional<std::string>& job);
// What a command's --job option says in --help.
inline constexpr const char* kJobHelp = "Job id (default: $TTEMU_JOB, else the only running system)";
// The control socket for a command's --job option, where empty means "not given".
inline std::string control_socket(const std::string& job) {
  return find_control_socket(job.empty() ? std::nullopt : std::optional<std::string>(job));
}

// Sends one request and returns the reply; a reply with "error" throws ttemu::Error with it.
nlohmann::json request(const std::string& socket_path, const nlohmann::json& message);

}  // namespace ttemu::launcher
