#include "launcher/control_client.hpp"

#include <fmt/format.h>

#include "emulator/job/job.hpp"
#include "emulator/common/asio.hpp"
#include "emulator/common/error.hpp"

namespace ttemu::launcher {

namespace asio = boost::asio;

std::string find_control_socket(const std::optional<std::string>& named) {
  return job::control_socket_path(job::find_job(named));
}

nlohmann::json request(const std::string& socket_path, const nlohmann::json& message) {
  asio::io_context io;
  asio::local::stream_protocol::socket s(io);
  boost::system::error_code ec;
  s.connect(asio::local::stream_protocol::endpoint(socket_path), ec);
  if (ec) throw Error(fmt::format("{}: cannot connect: {}", socket_path, ec.message()));
  // A file name that is not UTF-8 (a plan's source) must not make dump() throw.
  std::string line = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  asio::write(s, asio::buffer(line), ec);
  asio::streambuf buf;
  size_t n = asio::read_until(s, buf, '\n', ec);
  if (ec && n == 0) throw Error(fmt::format("{}: the launcher closed the connection", socket_path));
  std::string reply(asio::buffers_begin(buf.data()), asio::buffers_begin(buf.data()) + static_cast<long>(n));
  auto doc = nlohmann::json::parse(reply, nullptr, false);
  if (doc.is_discarded()) throw Error(fmt::format("{}: malformed reply from the launcher", socket_path));
  if (doc.contains("error")) throw Error(doc["error"].get<std::string>());
  return doc;
}

}  // namespace ttemu::launcher
