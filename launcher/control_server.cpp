#include "launcher/control_server.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::launcher {

namespace asio = boost::asio;

ControlServer::ControlServer(asio::io_context& io, std::string path, ControlTarget& target)
    : ControlServer(io, std::move(path), [&target](const std::string& line, const auto& answer) {
        handle_request(line, target, answer);
      }) {}

ControlServer::ControlServer(asio::io_context& io, std::string path, Handler handler)
    : path_(std::move(path)), handler_(std::move(handler)), acceptor_(io), retry_(io) {
  ::unlink(path_.c_str());
  boost::system::error_code ec;
  acceptor_.open(asio::local::stream_protocol(), ec);
  if (!ec) acceptor_.bind(asio::local::stream_protocol::endpoint(path_), ec);
  if (!ec) ::chmod(path_.c_str(), 0600);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("{}: cannot open the control socket: {}", path_, ec.message()));
  accept();
}

void ControlServer::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  retry_.cancel();
  ::unlink(path_.c_str());
}

void ControlServer::accept() {
  acceptor_.async_accept([this](auto ec, asio::local::stream_protocol::socket s) {
    if (ec == asio::error::operation_aborted || closed_) return;
    if (ec) {
      // Out of descriptors, say: try again shortly rather than stop serving for good.
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](auto ec2) {
        if (!ec2 && !closed_) accept();
      });
      return;
    }
    serve(std::make_shared<asio::local::stream_protocol::socket>(std::move(s)));
    accept();
  });
}

void ControlServer::serve(std::shared_ptr<asio::local::stream_protocol::socket> conn) {
  auto buf = std::make_shared<asio::streambuf>(kMaxRequestBytes);
  asio::async_read_until(*conn, *buf, '\n', [this, conn, buf](auto ec, size_t n) {
    auto answer = [conn](const std::string& line) {
      auto out = std::make_shared<std::string>(line);
      asio::async_write(*conn, asio::buffer(*out), [conn, out](auto, size_t) {});
    };
    if (ec == asio::error::not_found) {  // the buffer filled up without a '\n'
      return answer(reply_line({{"error", fmt::format("request longer than {} bytes; the connection is closed", kMaxRequestBytes)}}));
    }
    if (ec) return;  // the client left
    std::string line(asio::buffers_begin(buf->data()), asio::buffers_begin(buf->data()) + static_cast<long>(n));
    handler_(line, answer);
  });
}

}  // namespace ttemu::launcher
