// The protocol between the control plane and a host agent, one JSON object per line:
//
// agent -> control plane                       control plane -> agent
//   {"hello": rank, "version", "pid"}            {"setup": {job, job_hash, tables, version, ...}}
//   {"started": node, "pid"}                     {"start": node, "config": "<Config line>"
//                                                  [, "renew": {"tables": {...}, "version"}]}
//   {"node": node, "from": "<FromChip line>"}    {"node": node, "to": "<ToChip line>"}
//   {"died": node, "pid", "how"}                 {"kill": node}
//   {"entries": node, "list": [{"hex", "age_ns"}]}  {"tables": {...}, "version"}
//   {"status_reply": id, "chips", "ends"}        {"status": id}
//   {"request": id, "line"}                      {"answer": id, "line"}
//
// Chip messages travel as the very lines the chips read and write (process/chip_messages.hpp).
#include "launcher/host_agents.hpp"

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/routing/address.hpp"
#include "launcher/host_wire.hpp"

namespace ttemu::launcher {

namespace asio = boost::asio;
namespace msg = process::msg;
using nlohmann::json;

struct HostAgents::Gather {
  json chips = json::object(), ends = json::object();
  int waiting = 0;
  bool done = false;
  std::function<void(const json&, const json&)> reply;
  std::shared_ptr<asio::steady_timer> timer;
  void finish() {
    if (done) return;
    done = true;
    timer->cancel();
    reply(chips, ends);
  }
};

HostAgents::HostAgents(asio::io_context& io, const control::System& sys, MultiHost multi, std::unique_ptr<LocalChips> local,
                       Events events, Hooks hooks)
    : io_(io), sys_(sys), multi_(std::move(multi)), local_(std::move(local)),
      events_(std::move(events)), hooks_(std::move(hooks)), acceptor_(io),
      remote_pid_(sys.chips.size(), 0),
      starting_(sys.chips.size(), false) {}

HostAgents::~HostAgents() { kill_all(); }

uint16_t HostAgents::listen(const std::string& address) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(address, ec);
  if (ec) throw Error(fmt::format("'{}' is not an IP address", address));
  const asio::ip::tcp::endpoint at(addr, 0);
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot listen for host agents on {}: {}", address, ec.message()));
  accept();
  return acceptor_.local_endpoint().port();
}

void HostAgents::set_hosts(std::vector<HostEntry> hosts) { hosts_ = std::move(hosts); }

const std::string& HostAgents::address_of(int node) const {
  return hosts_.at(static_cast<size_t>(host_of(node))).address;
}

void HostAgents::accept() {
  acceptor_.async_accept([this](auto ec, asio::ip::tcp::socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      auto ch = std::make_shared<HostChannel>(std::move(s));
      unnamed_.push_back(ch);
      std::weak_ptr<HostChannel> weak = ch;
      ch->start({[this, weak](const json& m) {
                   if (auto c = weak.lock()) on_message(c, m);
                 },
                 [this, weak](const std::string& why) {
                   if (auto c = weak.lock()) on_closed(c, why);
                 }});
    }
    accept();
  });
}

HostAgents::Agent* HostAgents::agent_of(int node) {
  auto it = agents_.find(host_of(node));
  return it == agents_.end() || it->second.lost ? nullptr : &it->second;
}

void HostAgents::on_message(const std::shared_ptr<HostChannel>& ch, const json& m) {
  if (m.contains("hello")) {
    const int host = m.value("hello", -1);
    std::erase(unnamed_, ch);
    if (host < 0 || host >= static_cast<int>(sys_.hosts.size()) || host == multi_.self || agents_.count(host)) {
      fmt::print(stderr, "ttemu: {} said it is host agent {}, which is not expected; closing it\n", ch->peer(), m["hello"].dump());
      ch->close();
      return;
    }
    if (m.value("version", "") != host_wire_version()) {
      fmt::print(stderr, "ttemu: the host agent of {} runs ttemu {}, this one {}; closing it\n", sys_.hosts[static_cast<size_t>(host)],
                 m.value("version", "?"), host_wire_version());
      ch->close();
      return;
    }
    agents_[host] = Agent{ch, true, false};
    ch->send({{"setup", hooks_.setup()}});
    if (config_) start_remote(host);
    return;
  }
  auto node_in = [&](const char* key) {
    const int v = m.value(key, -1);
    if (v < 0 || v >= sys_.node_count()) throw Error(fmt::format("{} named no chip in '{}'", ch->peer(), key));
    return v;
  };
  try {
    if (m.contains("from")) {
      events_.message(node_in("node"), msg::decode_from_chip(m.at("from").get<std::string>()));
    } else if (m.contains("started")) {
      const int v = node_in("started");
      remote_pid_[static_cast<size_t>(v)] = m.value("pid", 0);
      starting_[static_cast<size_t>(v)] = false;
    } else if (m.contains("died")) {
      const int v = node_in("died");
      const int pid = remote_pid_[static_cast<size_t>(v)];
      remote_pid_[static_cast<size_t>(v)] = 0;
      starting_[static_cast<size_t>(v)] = false;
      if (pid > 0) events_.died(v, pid, m.value("how", std::string("died")));
    } else if (m.contains("entries")) {
      const int v = node_in("entries");
      for (const auto& e : m.at("list")) hooks_.status_entry(v, status_entry_from_hex(e.at("hex").get<std::string>()), e.at("age_ns").get<int64_t>());
    } else if (m.contains("status_reply")) {
      auto it = gathers_.find(m["status_reply"].get<uint64_t>());
      if (it == gathers_.end()) return;
      auto g = it->second;
      g->chips.update(m.at("chips"));
      g->ends.update(m.at("ends"));
      if (--g->waiting == 0) {
        gathers_.erase(it);
        g->finish();
      }
    } else if (m.contains("request")) {
      const uint64_t id = m["request"].get<uint64_t>();
      std::weak_ptr<HostChannel> weak = ch;
      hooks_.request(m.at("line").get<std::string>(), [weak, id](const std::string& line) {
        if (auto c = weak.lock()) c->send({{"answer", id}, {"line", line}});
      });
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "ttemu: a message from {} is not understood ({}): {}\n", ch->peer(), e.what(), m.dump().substr(0, 200));
  }
}

void HostAgents::on_closed(const std::shared_ptr<HostChannel>& ch, const std::string& why) {
  std::erase(unnamed_, ch);
  for (auto& [host, a] : agents_) {
    if (a.channel != ch || a.lost) continue;
    a.lost = true;
    hooks_.host_lost(sys_.hosts[static_cast<size_t>(host)], why);
    for (int v = 0; v < sys_.node_count(); ++v) {
      const int pid = remote_pid_[static_cast<size_t>(v)];
      if (host_of(v) == host) starting_[static_cast<size_t>(v)] = false;
      if (host_of(v) != host || pid == 0) continue;
      remote_pid_[static_cast<size_t>(v)] = 0;
      events_.died(v, pid, fmt::format("went with host {} ({})", sys_.hosts[static_cast<size_t>(host)], why));
    }
  }
}

void HostAgents::start_remote(int host) {
  for (int v = 0; v < sys_.node_count(); ++v) {
    if (host_of(v) == host) start(v, config_(v));
  }
}

void HostAgents::start_all(const std::function<msg::Config(int node)>& config) {
  config_ = config;
  for (int v = 0; v < sys_.node_count(); ++v) {
    if (here(v)) local_->start(v, config(v));
  }
  for (auto& [host, a] : agents_) {
    if (!a.lost) start_remote(host);
  }
}

void HostAgents::start(int node, const msg::Config& config) {
  if (here(node)) return local_->start(node, config);
  Agent* a = agent_of(node);
  if (!a) throw Error(fmt::format("the host of {} is gone", routing::to_string(sys_.chips[static_cast<size_t>(node)].id)));
  a->channel->send({{"start", node}, {"config", msg::encode(msg::ToChip{config})}});
  starting_[static_cast<size_t>(node)] = true;
}

void HostAgents::restart(int node, const msg::Config& config, const json& tables, uint32_t version) {
  if (here(node)) throw Error("HostAgents::restart: a chip of this host is restarted by its launcher");
  Agent* a = agent_of(node);
  if (!a) throw Error(fmt::format("the host of {} is gone", routing::to_string(sys_.chips[static_cast<size_t>(node)].id)));
  a->channel->send({{"start", node}, {"config", msg::encode(msg::ToChip{config})}, {"renew", {{"tables", tables}, {"version", version}}}});
  starting_[static_cast<size_t>(node)] = true;
}

void HostAgents::kill(int node) {
  if (here(node)) return local_->kill(node);
  if (Agent* a = agent_of(node)) a->channel->send({{"kill", node}});
}

void HostAgents::send(int node, const msg::ToChip& m) {
  if (here(node)) return local_->send(node, m);
  // (To a chip being started too: its agent starts it before it reads what follows.)
  const bool listening = remote_pid_[static_cast<size_t>(node)] > 0 || starting_[static_cast<size_t>(node)];
  if (Agent* a = agent_of(node); a && listening) a->channel->send({{"node", node}, {"to", msg::encode(m)}});
}

bool HostAgents::alive(int node) const { return here(node) ? local_->alive(node) : remote_pid_[static_cast<size_t>(node)] > 0; }
int HostAgents::pid(int node) const { return here(node) ? local_->pid(node) : remote_pid_[static_cast<size_t>(node)]; }

int HostAgents::running() const {
  int n = local_->running();
  for (int v = 0; v < sys_.node_count(); ++v) n += !here(v) && remote_pid_[static_cast<size_t>(v)] > 0;
  return n;
}

void HostAgents::kill_all() {
  local_->kill_all();
  // An agent whose control plane leaves kills its chips and ends.
  for (auto& [host, a] : agents_) a.channel->close();
  for (auto& ch : unnamed_) ch->close();
  unnamed_.clear();
  std::fill(remote_pid_.begin(), remote_pid_.end(), 0);
  boost::system::error_code ec;
  acceptor_.close(ec);
}

void HostAgents::reload_tables(const json& tables, uint32_t version) {
  for (auto& [host, a] : agents_) {
    if (!a.lost) a.channel->send({{"tables", tables}, {"version", version}});
  }
}

void HostAgents::gather_status(std::function<void(const json&, const json&)> done, std::chrono::milliseconds wait) {
  auto g = std::make_shared<Gather>();
  g->reply = std::move(done);
  g->timer = std::make_shared<asio::steady_timer>(io_);
  const uint64_t id = ++next_status_;
  for (auto& [host, a] : agents_) {
    if (a.lost) continue;
    ++g->waiting;
    a.channel->send({{"status", id}});
  }
  if (g->waiting == 0) return g->finish();
  gathers_[id] = g;
  g->timer->expires_after(wait);
  g->timer->async_wait([this, g, id](auto ec) {
    if (ec) return;
    gathers_.erase(id);
    g->finish();
  });
}

}  // namespace ttemu::launcher
