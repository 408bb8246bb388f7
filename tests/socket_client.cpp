// A worker program for sockets against a live system: run as
// `ttemu launch spec_4mesh_3x3.yaml --timeout-ms 60000 -- ttemu_socket_client` (it finds the
// system through TTEMU_JOB). Real chip processes, real links, the client library's socket API
// (spec section 4); the sender and the receiver are workers on different chips, each in a
// thread of its own.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "libfabric_tt/tt_fabric.h"
#include "tests/client_support.hpp"
#include "tests/eventually.hpp"

namespace {

using ttemu::test::Handle;
using ttemu::test::open_on;
using ttemu::test::status_text;

constexpr uint64_t kSrc = 8 << 20;    // the sender's data, in its chip's L1
constexpr uint64_t kWrites = 10 << 20;  // where the other worker's writes land
constexpr tt_fabric_device kAny{TT_FABRIC_ANY, TT_FABRIC_ANY};

std::vector<uint8_t> stream_bytes(size_t n, uint32_t salt) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(salt);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Reads until the end of the stream (or an error, which fails the test).
std::vector<uint8_t> read_all(tt_fabric* f, int socket, size_t chunk = 3000) {
  std::vector<uint8_t> got, buf(chunk);
  for (;;) {
    const int64_t n = fabric_socket_recv(f, socket, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      ADD_FAILURE() << "recv: " << tt_fabric_strerror(static_cast<int>(n));
      break;
    }
    got.insert(got.end(), buf.begin(), buf.begin() + n);
  }
  return got;
}

// Streams `data` from M0D0 to a receiver in mesh 3 and back checks every byte, with the
// handshake given; the receiver reads in a thread of its own while the sender sends.
void stream_across_meshes(int handshake, uint32_t socket_id) {
  Handle tx, rx;
  open_on(tx, {0, 0}, 2);
  open_on(rx, {3, 8}, 2);
  const tt_fabric_socket_options opt{handshake, 0, 0, 0, 0, {}};
  const int r = fabric_socket_open_with(rx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, {0, 0}, 0, &opt);
  const int s = fabric_socket_open_with(tx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {3, 8}, 0, &opt);
  ASSERT_GE(r, 0) << tt_fabric_strerror(r);
  ASSERT_GE(s, 0) << tt_fabric_strerror(s);
  ASSERT_EQ(fabric_socket_connect(tx.f, s), TT_FABRIC_OK);
  ASSERT_EQ(fabric_socket_connect(rx.f, r), TT_FABRIC_OK);
  const auto data = stream_bytes(1 << 20, socket_id);
  std::memcpy(tt_fabric_memory(tx.f, kSrc, data.size()), data.data(), data.size());
  std::vector<uint8_t> got;
  std::thread reader([&] { got = read_all(rx.f, r); });
  for (size_t at = 0; at < data.size(); at += 64 << 10) {
    ASSERT_EQ(fabric_socket_send(tx.f, s, kSrc + at, 64 << 10), TT_FABRIC_OK);
  }
  tt_fabric_status st{};
  EXPECT_EQ(fabric_socket_close(tx.f, s, &st), TT_FABRIC_OK);
  EXPECT_EQ(st.status, TT_FABRIC_OK);
  reader.join();
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "every byte, in order";
  EXPECT_EQ(fabric_socket_close(rx.f, r, nullptr), TT_FABRIC_OK);
}

TEST(Socket, AnEndToEndStreamCrossesMeshesByteForByte) { stream_across_meshes(TT_FABRIC_END_TO_END, 11); }
TEST(Socket, ALocalHandshakeStreamCrossesMeshesByteForByte) { stream_across_meshes(TT_FABRIC_LOCAL_HANDSHAKE, 12); }

// Spec 2.4: two senders open socket 7 toward one receiver, in epochs 1 and 2. The receiver is
// ready for epoch 2: only that sender connects; the other keeps waiting, told why, and
// connects once the receiver moves on to epoch 1. Each stream arrives whole and unmixed.
TEST(Socket, EpochsKeepTwoSendersApart) {
  Handle a, b, r;
  open_on(a, {1, 4}, 2);
  open_on(b, {2, 0}, 2);
  open_on(r, {0, 8}, 2);
  const int sa = fabric_socket_open(a.f, 0, 1, 7, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 8}, 0);
  const int sb = fabric_socket_open(b.f, 0, 2, 7, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 8}, 0);
  ASSERT_GE(sa, 0);
  ASSERT_GE(sb, 0);
  int rs = fabric_socket_open(r.f, 0, 2, 7, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, kAny, 0);
  ASSERT_GE(rs, 0);
  ASSERT_EQ(fabric_socket_connect(b.f, sb), TT_FABRIC_OK);
  tt_fabric_set_nonblocking(a.f, 1);
  tt_fabric_socket_info info{};
  EXPECT_TRUE(ttemu::test::eventually([&] {
    return fabric_socket_info(a.f, sa, &info) == TT_FABRIC_OK && info.status == TT_FABRIC_EEPOCH;
  }, std::chrono::seconds(20))) << "the epoch-1 sender hears that the receiver is in another epoch";
  EXPECT_EQ(fabric_socket_connect(a.f, sa), TT_FABRIC_EAGAIN) << "and still waits";

  const auto data_b = stream_bytes(200 << 10, 2);
  std::memcpy(tt_fabric_memory(b.f, kSrc, data_b.size()), data_b.data(), data_b.size());
  std::vector<uint8_t> got;
  std::thread reader([&] { got = read_all(r.f, rs); });
  ASSERT_EQ(fabric_socket_send(b.f, sb, kSrc, static_cast<uint32_t>(data_b.size())), TT_FABRIC_OK);
  ASSERT_EQ(fabric_socket_close(b.f, sb, nullptr), TT_FABRIC_OK);
  reader.join();
  EXPECT_TRUE(got == data_b) << "epoch 2 holds sender B's stream only";
  ASSERT_EQ(fabric_socket_close(r.f, rs, nullptr), TT_FABRIC_OK);

  rs = fabric_socket_open(r.f, 0, 1, 7, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, kAny, 0);
  ASSERT_GE(rs, 0);
  tt_fabric_set_nonblocking(a.f, 0);
  ASSERT_EQ(fabric_socket_connect(a.f, sa), TT_FABRIC_OK);
  const auto data_a = stream_bytes(200 << 10, 1);
  std::memcpy(tt_fabric_memory(a.f, kSrc, data_a.size()), data_a.data(), data_a.size());
  reader = std::thread([&] { got = read_all(r.f, rs); });
  ASSERT_EQ(fabric_socket_send(a.f, sa, kSrc, static_cast<uint32_t>(data_a.size())), TT_FABRIC_OK);
  ASSERT_EQ(fabric_socket_close(a.f, sa, nullptr), TT_FABRIC_OK);
  reader.join();
  EXPECT_TRUE(got == data_a) << "epoch 1 holds sender A's stream only";
  EXPECT_EQ(fabric_socket_close(r.f, rs, nullptr), TT_FABRIC_OK);
}

// Spec 2.4.4, both ways, across chip processes. The consumer (M0D8) stalls; its producer
// (M0D0) streams far more than the consumer holds; behind the stream, on the same FVC and
// route, another worker writes to the consumer's chip. Local handshake: the stream backs up
// into the fabric and the writes cannot pass it until the consumer reads. End-to-end: the
// producer stops at its credit, the DSCB takes the rest, and the writes complete while the
// consumer still stalls. Then the consumer reads, and every byte arrives in order.
void stalled_consumer(int handshake, uint32_t socket_id) {
  Handle tx, rx, writer;
  open_on(tx, {0, 0}, 2);
  open_on(writer, {0, 0}, 3);
  open_on(rx, {0, 8}, 2);
  const tt_fabric_socket_options opt{handshake, 0, 0, 0, 0, {}};
  const int r = fabric_socket_open_with(rx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, {0, 0}, 0, &opt);
  const int s = fabric_socket_open_with(tx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 8}, 0, &opt);
  ASSERT_GE(r, 0);
  ASSERT_GE(s, 0);
  ASSERT_EQ(fabric_socket_connect(tx.f, s), TT_FABRIC_OK);
  const auto data = stream_bytes(1 << 20, socket_id);
  std::memcpy(tt_fabric_memory(tx.f, kSrc, data.size()), data.data(), data.size());
  tt_fabric_set_nonblocking(tx.f, 1);  // queue the whole stream and go on
  ASSERT_EQ(fabric_socket_send(tx.f, s, kSrc, static_cast<uint32_t>(data.size())), TT_FABRIC_OK);
  // End to end, more writes than the command buffer has slots (256): the waiting stream holds
  // none of them.
  const uint32_t writes = handshake == TT_FABRIC_END_TO_END ? 300 : 4;
  for (uint32_t i = 0; i < writes; ++i) {
    ASSERT_EQ(fabric_async_write(writer.f, 0, kSrc, {0, 8}, kWrites + (i % 64) * 4096, 4096, 0, 5, nullptr), TT_FABRIC_OK);
  }
  tt_fabric_socket_info in{}, out{};
  if (handshake == TT_FABRIC_LOCAL_HANDSHAKE) {
    ASSERT_TRUE(ttemu::test::eventually([&] { return fabric_socket_info(rx.f, r, &in) == 0 && in.backed_up == 1; },
                                        std::chrono::seconds(20)))
        << "the stream backs up into the fabric";
    EXPECT_GT(tt_fabric_pending(writer.f, 5), 0) << "and the writes wait behind it";
  } else {
    EXPECT_EQ(fabric_async_write_barrier(writer.f, 5), TT_FABRIC_OK) << "the writes complete while the consumer stalls";
    EXPECT_EQ(fabric_socket_send(tx.f, s, kSrc, 4096), TT_FABRIC_ENOCREDITS)
        << "non-blocking: all the consumer has room for is queued already; nothing more is";
    ASSERT_EQ(fabric_socket_info(rx.f, r, &in), TT_FABRIC_OK);
    ASSERT_EQ(fabric_socket_info(tx.f, s, &out), TT_FABRIC_OK);
    EXPECT_EQ(in.backed_up, 0u);
    EXPECT_GT(in.spilled, 0u) << "the DSCB took what L1CB could not";
    EXPECT_LT(out.sent, data.size()) << "the producer stopped at its credit";
  }
  // The consumer resumes.
  std::vector<uint8_t> got, buf(5000);
  while (got.size() < data.size()) {
    const int64_t n = fabric_socket_recv(rx.f, r, buf.data(), buf.size());
    ASSERT_GT(n, 0) << tt_fabric_strerror(static_cast<int>(n));
    got.insert(got.end(), buf.begin(), buf.begin() + n);
  }
  EXPECT_TRUE(got == data);
  EXPECT_EQ(fabric_async_write_barrier(writer.f, 5), TT_FABRIC_OK);
  EXPECT_EQ(tt_fabric_nacks(writer.f), 0u);
  tt_fabric_set_nonblocking(tx.f, 0);
  EXPECT_EQ(fabric_socket_close(tx.f, s, nullptr), TT_FABRIC_OK);
  EXPECT_EQ(fabric_socket_close(rx.f, r, nullptr), TT_FABRIC_OK);
}

TEST(Socket, AStalledConsumerBlocksTheSharedFvcWithLocalHandshake) { stalled_consumer(TT_FABRIC_LOCAL_HANDSHAKE, 21); }
TEST(Socket, AStalledConsumerBlocksNothingWithEndToEndHandshake) { stalled_consumer(TT_FABRIC_END_TO_END, 22); }

nlohmann::json status() { return nlohmann::json::parse(status_text("--json"), nullptr, false); }

// Every reservation `ttemu status` shows, as "CHIP fvc F -> OUTPUT by OWNER".
std::vector<std::string> reservations_in_status() {
  std::vector<std::string> out;
  const nlohmann::json s = status();
  if (!s.is_object()) {
    ADD_FAILURE() << "ttemu status --json did not answer";
    return out;
  }
  for (const auto& c : s["chips"]) {
    for (const auto& r : c.value("reservations", nlohmann::json::array())) {
      out.push_back(c["name"].get<std::string>() + " fvc " + std::to_string(r["fvc"].get<int>()) + " -> " +
                    r["output"].get<std::string>() + " by " + r["owner"].get<std::string>());
    }
  }
  return out;
}

// Spec 2.4.2 across chip processes: an SSocket from M0D0 into mesh 3 reserves its FVC at every
// router on its route, as `ttemu status` shows; a second SSocket from the same chip finds no
// reservable FVC left (the open error); the stream arrives whole; closing frees every
// reservation, and the FVC can be bound again.
// Opens SSocket `id` (epoch 1, the library's choice of FVC) from a worker on core 2 of `from`
// (tx, socket *s) to one on core 2 of `to` (rx, socket *r), and connects it.
void connect_ssocket(Handle& tx, tt_fabric_device from, Handle& rx, tt_fabric_device to, uint32_t id, int* s, int* r) {
  open_on(tx, from, 2);
  open_on(rx, to, 2);
  *r = fabric_socket_open(rx.f, 0, 1, id, TT_FABRIC_SSOCKET, TT_FABRIC_RECEIVE, from, -1);
  *s = fabric_socket_open(tx.f, 0, 1, id, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, to, -1);
  ASSERT_GE(*r, 0) << tt_fabric_strerror(*r);
  ASSERT_GE(*s, 0) << tt_fabric_strerror(*s);
  ASSERT_EQ(fabric_socket_connect(tx.f, *s), TT_FABRIC_OK);
}

TEST(Socket, AnSSocketReservesItsFvcVisiblyAndFreesItOnClose) {
  Handle tx, rx;
  int s = -1, r = -1;
  ASSERT_NO_FATAL_FAILURE(connect_ssocket(tx, {0, 0}, rx, {3, 8}, 31, &s, &r));
  const auto held = reservations_in_status();
  ASSERT_GE(held.size(), 3u) << "a router per hop, and the receiver's center";
  for (const auto& h : held) EXPECT_NE(h.find("fvc 1 -> "), std::string::npos) << h;
  for (const auto& h : held) EXPECT_NE(h.find(" by M0D0"), std::string::npos) << h;
  EXPECT_EQ(std::count_if(held.begin(), held.end(), [](const std::string& h) { return h.find("M3D8 fvc 1 -> center") == 0; }), 1);
  // The text view says the same, in words.
  const std::string text = status_text("");
  EXPECT_NE(text.find("socket 31 on M0D0 (endpoint " + std::to_string(s) + ", core 2, process " + std::to_string(getpid()) +
                      "): ssocket to M3D8 epoch 1 fvc 1"),
            std::string::npos)
      << text << "(the worker's process is the socket's owner)";
  EXPECT_NE(text.find("reserved: fvc 1 toward center on M3D8, for M0D0's socket endpoint " + std::to_string(s)), std::string::npos) << text;
  EXPECT_EQ(fabric_socket_open(tx.f, 0, 1, 32, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, {3, 8}, -1), TT_FABRIC_ESOCKETOPEN)
      << "the one reservable FVC (of --fvcs 2) is bound";

  const auto data = stream_bytes(512 << 10, 31);
  std::memcpy(tt_fabric_memory(tx.f, kSrc, data.size()), data.data(), data.size());
  std::vector<uint8_t> got;
  std::thread reader([&] { got = read_all(rx.f, r); });
  ASSERT_EQ(fabric_socket_send(tx.f, s, kSrc, static_cast<uint32_t>(data.size())), TT_FABRIC_OK);
  tt_fabric_status st{};
  ASSERT_EQ(fabric_socket_close(tx.f, s, &st), TT_FABRIC_OK);
  EXPECT_EQ(st.fvc, 1);
  reader.join();
  EXPECT_TRUE(got == data);
  EXPECT_TRUE(ttemu::test::eventually([] { return reservations_in_status().empty(); }, std::chrono::seconds(20)))
      << "closed: every router freed it";
  EXPECT_EQ(fabric_socket_close(rx.f, r, nullptr), TT_FABRIC_OK);
  const int again = fabric_socket_open(tx.f, 0, 1, 33, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, {3, 8}, -1);
  EXPECT_GE(again, 0) << "the FVC is free to bind again";
  EXPECT_EQ(fabric_socket_close(tx.f, again, nullptr), TT_FABRIC_OK);
}

// Spec 2.4.2: a multicast SSocket from M1D4 to the 2x2 block at M0D0, each receiver a worker
// on its own chip reading in its own thread: every one gets the whole stream, and the end.
TEST(Socket, AMulticastSSocketReachesEveryReceiver) {
  const std::vector<uint16_t> group{0, 1, 3, 4};
  Handle tx;
  open_on(tx, {1, 4}, 2);
  std::vector<Handle> rx(group.size());
  std::vector<int> r;
  for (size_t k = 0; k < group.size(); ++k) {
    open_on(rx[k], {0, group[k]}, 2);
    r.push_back(fabric_socket_open(rx[k].f, 0, 3, 41, TT_FABRIC_SSOCKET, TT_FABRIC_RECEIVE, {1, 4}, -1));
    ASSERT_GE(r.back(), 0) << tt_fabric_strerror(r.back());
  }
  tt_fabric_socket_options opt{TT_FABRIC_END_TO_END, 0, 0, 0, 0, {1, 0, 0, 1}};
  const int s = fabric_socket_open_with(tx.f, 0, 3, 41, TT_FABRIC_SSOCKET | TT_FABRIC_MULTICAST, TT_FABRIC_SEND, {0, 0}, -1, &opt);
  ASSERT_GE(s, 0) << tt_fabric_strerror(s);
  ASSERT_EQ(fabric_socket_connect(tx.f, s), TT_FABRIC_OK);
  const auto data = stream_bytes(256 << 10, 41);
  std::memcpy(tt_fabric_memory(tx.f, kSrc, data.size()), data.data(), data.size());
  std::vector<std::vector<uint8_t>> got(group.size());
  std::vector<std::thread> readers;
  for (size_t k = 0; k < group.size(); ++k) readers.emplace_back([&, k] { got[k] = read_all(rx[k].f, r[k]); });
  ASSERT_EQ(fabric_socket_send(tx.f, s, kSrc, static_cast<uint32_t>(data.size())), TT_FABRIC_OK);
  ASSERT_EQ(fabric_socket_close(tx.f, s, nullptr), TT_FABRIC_OK);
  for (auto& t : readers) t.join();
  for (size_t k = 0; k < group.size(); ++k) {
    EXPECT_TRUE(got[k] == data) << "M0D" << group[k] << " got " << got[k].size() << " bytes";
    EXPECT_EQ(fabric_socket_close(rx[k].f, r[k], nullptr), TT_FABRIC_OK);
  }
  EXPECT_TRUE(ttemu::test::eventually([] { return reservations_in_status().empty(); }, std::chrono::seconds(20)))
      << [] {
           std::string all;
           for (const auto& h : reservations_in_status()) all += h + "; ";
           return all;
         }();
}

// A worker that dies without closing (killed here, as a crash would, right after a non-blocking
// send queued its stream) leaves nothing behind: its chip sees its process end and closes its
// SSocket as its own close would, behind the data it had queued, so the receiver reads the
// whole stream and then its end, every router of the route frees the reservation, the endpoint
// is freed, and the FVC can be bound again.
TEST(Socket, AWorkerThatDiesWithoutClosingLeavesNoReservationBehind) {
  Handle rx;
  open_on(rx, {3, 8}, 2);
  const int r = fabric_socket_open(rx.f, 0, 1, 51, TT_FABRIC_SSOCKET, TT_FABRIC_RECEIVE, {0, 0}, -1);
  ASSERT_GE(r, 0) << tt_fabric_strerror(r);
  const auto data = stream_bytes(128 << 10, 51);  // fits the receiver's L1CB and DSCB: no reader needed
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t worker = fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {  // the worker that dies: it connects, sends, and is killed holding the socket
    char ok = 'n';
    tt_fabric* f = tt_fabric_open(nullptr, 0, 0, 3, nullptr, 0);
    const int s = f ? fabric_socket_open(f, 0, 1, 51, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, {3, 8}, -1) : -1;
    if (s >= 0 && fabric_socket_connect(f, s) == TT_FABRIC_OK && tt_fabric_set_nonblocking(f, 1) == TT_FABRIC_OK) {
      std::memcpy(tt_fabric_memory(f, kSrc, data.size()), data.data(), data.size());
      if (fabric_socket_send(f, s, kSrc, static_cast<uint32_t>(data.size())) == TT_FABRIC_OK) ok = 'y';
    }
    (void)!write(ready[1], &ok, 1);
    ::kill(::getpid(), SIGKILL);
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(worker, &wstatus, 0), worker);
  ASSERT_EQ(ok, 'y') << "the worker could not connect and queue its stream";
  ASSERT_TRUE(WIFSIGNALED(wstatus));

  EXPECT_TRUE(read_all(rx.f, r) == data) << "the stream, then its end";
  EXPECT_TRUE(ttemu::test::eventually([] { return reservations_in_status().empty(); }, std::chrono::seconds(20)))
      << "every router freed the dead worker's reservation";
  EXPECT_TRUE(ttemu::test::eventually([] { return status_text("").find("socket 51 on M0D0") == std::string::npos; },
                                      std::chrono::seconds(20)))
      << "its endpoint was freed";
  EXPECT_EQ(fabric_socket_close(rx.f, r, nullptr), TT_FABRIC_OK);
  Handle tx;
  open_on(tx, {0, 0}, 2);
  const int again = fabric_socket_open(tx.f, 0, 1, 52, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, {3, 8}, 1);
  EXPECT_GE(again, 0) << "FVC 1 is free to bind again: " << tt_fabric_strerror(again);
  if (again >= 0) {
    EXPECT_EQ(fabric_socket_close(tx.f, again, nullptr), TT_FABRIC_OK);
  }
}

TEST(Socket, BadArgumentsAreNamedAndDoNothing) {
  Handle h;
  open_on(h, {0, 0}, 2);
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_SSOCKET, TT_FABRIC_SEND, {0, 1}, 0), TT_FABRIC_EFVC) << "FVC 0 is not reservable";
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, 7, TT_FABRIC_SEND, {0, 1}, 0), TT_FABRIC_EARG);
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_DSOCKET | TT_FABRIC_MULTICAST, TT_FABRIC_SEND, {0, 1}, 0), TT_FABRIC_EARG)
      << "multicast is for SSockets";
  const tt_fabric_socket_options wide{TT_FABRIC_END_TO_END, 0, 0, 0, 0, {2, 2, 2, 2}};
  const int all9 = fabric_socket_open_with(h.f, 0, 1, 1, TT_FABRIC_SSOCKET | TT_FABRIC_MULTICAST, TT_FABRIC_RECEIVE, {0, 4}, -1, &wide);
  EXPECT_EQ(all9, TT_FABRIC_EARG) << "a receiver opens a plain SSocket from its sender";
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_DSOCKET, 9, {0, 1}, 0), TT_FABRIC_EARG);
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {9, 99}, 0), TT_FABRIC_EDEVICE);
  EXPECT_EQ(fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 1}, 99), TT_FABRIC_EFVC);
  EXPECT_EQ(fabric_socket_open(h.f, 99, 1, 1, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 1}, 0), TT_FABRIC_EPLANE);
  const tt_fabric_socket_options tiny{TT_FABRIC_END_TO_END, 0, 100, 0, 0, {}};
  EXPECT_EQ(fabric_socket_open_with(h.f, 0, 1, 1, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, {0, 1}, 0, &tiny), TT_FABRIC_ESIZE);
  EXPECT_EQ(fabric_socket_connect(h.f, 63), TT_FABRIC_ENOENDPOINT) << "a handle this worker does not hold";
  EXPECT_EQ(fabric_socket_send(h.f, -1, kSrc, 10), TT_FABRIC_ENOENDPOINT);
  const int s = fabric_socket_open(h.f, 0, 1, 1, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 1}, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(fabric_socket_send(h.f, s, kSrc, 10), TT_FABRIC_EARG) << "not connected yet";
  char buf[4];
  EXPECT_EQ(fabric_socket_recv(h.f, s, buf, sizeof buf), TT_FABRIC_ENOENDPOINT) << "not a receiving socket";
  tt_fabric_set_nonblocking(h.f, 1);
  EXPECT_EQ(fabric_socket_connect(h.f, s), TT_FABRIC_EAGAIN) << "nobody receives socket 1 on M0D1";
  EXPECT_EQ(fabric_socket_close(h.f, s, nullptr), TT_FABRIC_OK);
  EXPECT_EQ(fabric_socket_connect(h.f, s), TT_FABRIC_ENOENDPOINT) << "closed: the handle is gone";
  // Another worker's handle: no permission, and nothing happens to the socket.
  Handle other;
  open_on(other, {0, 0}, 3);
  tt_fabric_set_nonblocking(h.f, 0);
  const int mine = fabric_socket_open(h.f, 0, 1, 2, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, {0, 1}, 0);
  ASSERT_GE(mine, 0);
  EXPECT_EQ(fabric_socket_send(other.f, mine, kSrc, 10), TT_FABRIC_ENOPERM);
  EXPECT_EQ(fabric_socket_close(other.f, mine, nullptr), TT_FABRIC_ENOPERM);
  tt_fabric_socket_info info{};
  ASSERT_EQ(fabric_socket_info(h.f, mine, &info), TT_FABRIC_OK);
  EXPECT_EQ(info.state, TT_FABRIC_SOCKET_OPENING) << "still the owner's";
  EXPECT_EQ(fabric_socket_close(h.f, mine, nullptr), TT_FABRIC_OK);
}

// Last, as it kills a chip: the receiving chip of an SSocket dies (M0D2, route M0D0 -> M0D1 ->
// M0D2). Once the control plane has routed around it, the routers on the way free what the
// socket reserved toward it, and the sender hears that its stream is lost instead of waiting.
TEST(Socket, AnSSocketWhoseReceivingChipDiesLeavesNoReservation) {
  Handle tx, rx;
  int s = -1, r = -1;
  ASSERT_NO_FATAL_FAILURE(connect_ssocket(tx, {0, 0}, rx, {0, 2}, 61, &s, &r));
  auto held_by_live_chips = [] {
    auto held = reservations_in_status();
    std::erase_if(held, [](const std::string& h) { return h.starts_with("M0D2 "); });  // (a dead chip's block stays as it was)
    return held;
  };
  ASSERT_FALSE(held_by_live_chips().empty());
  const std::string kill = ttemu::test::ttemu_output("chip kill M0D2");
  EXPECT_TRUE(ttemu::test::eventually([&] { return held_by_live_chips().empty(); }, std::chrono::seconds(20)))
      << kill << "; still: " << [&] {
           std::string all;
           for (const auto& h : held_by_live_chips()) all += h + "; ";
           return all;
         }();
  tt_fabric_socket_info info{};
  EXPECT_TRUE(ttemu::test::eventually([&] { return fabric_socket_info(tx.f, s, &info) == TT_FABRIC_OK && info.state == TT_FABRIC_SOCKET_BROKEN; },
                                      std::chrono::seconds(20)));
  EXPECT_EQ(info.status, TT_FABRIC_ELOST);
  EXPECT_EQ(fabric_socket_close(tx.f, s, nullptr), TT_FABRIC_OK);
}

}  // namespace
