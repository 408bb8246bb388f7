// One host's control connection in a multi-host launch (docs/multi-host.md): TCP between the
// control plane and a host agent, one JSON object per line both ways. Writes are queued and
// asynchronous (a slow peer stalls neither end); reads deliver each object to `message`; the
// end of the connection (the peer's process died, its host is gone, or a line was unreadable)
// is told once, to `closed`, with the reason.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "emulator/common/asio.hpp"

namespace ttemu::launcher {

// The longest line either end reads (routing tables of a large system are the longest).
inline constexpr size_t kMaxHostLine = size_t{256} << 20;

class HostChannel : public std::enable_shared_from_this<HostChannel> {
 public:
  struct Events {
    std::function<void(const nlohmann::json&)> message;
    std::function<void(const std::string& why)> closed;
  };
  explicit HostChannel(boost::asio::ip::tcp::socket socket);
  // Starts reading; call once, after the events are set.
  void start(Events events);
  void send(const nlohmann::json& message);
  // Closes at once; `closed` is not called for it.
  void close();
  std::string peer() const { return peer_; }

 private:
  void read();
  void write();
  void lost(const std::string& why);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::streambuf in_{kMaxHostLine};
  std::deque<std::string> out_;
  Events events_;
  std::string peer_;
  bool open_ = true;
};

// The address to tell others for an endpoint: "10.0.0.1" or "fd00::1" (no brackets).
std::string address_text(const boost::asio::ip::address& a);

}  // namespace ttemu::launcher
