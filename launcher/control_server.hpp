// The job's control socket (a UNIX stream socket in the runtime directory, mode 0600): one
// request line per connection, at most kMaxRequestBytes, answered by control_requests.cpp's
// handler against the running system (ControlTarget). Replies are written asynchronously: a
// client that does not read cannot stall the launcher.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "emulator/common/asio.hpp"
#include "launcher/control_requests.hpp"

namespace ttemu::launcher {

class ControlServer {
 public:
  // Answers one request line through `answer` (exactly once, now or later).
  using Handler = std::function<void(const std::string& line, const std::function<void(const std::string&)>& answer)>;
  // Binds and listens at once; throws Error when it cannot.
  ControlServer(boost::asio::io_context& io, std::string path, ControlTarget& target);
  // The same with another handler: a host agent's, which passes requests on to the control
  // plane of a multi-host launch.
  ControlServer(boost::asio::io_context& io, std::string path, Handler handler);
  ~ControlServer() { close(); }
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const { return path_; }
  // Stops accepting and removes the socket.
  void close();

 private:
  void accept();
  void serve(std::shared_ptr<boost::asio::local::stream_protocol::socket> conn);

  std::string path_;
  Handler handler_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  bool closed_ = false;
};

}  // namespace ttemu::launcher
