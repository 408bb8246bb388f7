#include "launcher/host_channel.hpp"

#include <fmt/format.h>

namespace ttemu::launcher {

namespace asio = boost::asio;
using nlohmann::json;

std::string address_text(const asio::ip::address& a) {
  return a.is_v6() ? a.to_v6().to_string() : a.to_string();
}

HostChannel::HostChannel(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  peer_ = ec ? "an unknown peer" : fmt::format("{}:{}", address_text(remote.address()), remote.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  socket_.set_option(asio::socket_base::keep_alive(true), ec);
}

void HostChannel::start(Events events) {
  events_ = std::move(events);
  read();
}

void HostChannel::send(const json& message) {
  if (!open_) return;
  out_.push_back(message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  if (out_.size() == 1) write();
}

void HostChannel::close() {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ec;
  socket_.close(ec);
}

void HostChannel::write() {
  asio::async_write(socket_, asio::buffer(out_.front()), [self = shared_from_this()](auto ec, size_t) {
    if (!self->open_) return;
    if (ec) return self->lost(fmt::format("cannot write to {}: {}", self->peer_, ec.message()));
    self->out_.pop_front();
    if (!self->out_.empty()) self->write();
  });
}

void HostChannel::read() {
  asio::async_read_until(socket_, in_, '\n', [self = shared_from_this()](auto ec, size_t n) {
    if (!self->open_) return;
    if (ec == asio::error::eof || ec == asio::error::connection_reset) return self->lost(fmt::format("{} closed the connection", self->peer_));
    if (ec) return self->lost(fmt::format("reading from {}: {}", self->peer_, ec.message()));
    std::string line(asio::buffers_begin(self->in_.data()), asio::buffers_begin(self->in_.data()) + static_cast<long>(n));
    self->in_.consume(n);
    json m = json::parse(line, nullptr, false);
    if (!m.is_object()) return self->lost(fmt::format("{} sent a line that is not a JSON object", self->peer_));
    self->events_.message(m);
    if (self->open_) self->read();
  });
}

void HostChannel::lost(const std::string& why) {
  if (!open_) return;
  close();
  if (events_.closed) events_.closed(why);
}

}  // namespace ttemu::launcher
