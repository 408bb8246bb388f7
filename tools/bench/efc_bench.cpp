// The Ethernet Fallback Channel under a cut, between two chip processes, in one run: the pause
// (from the cut to payloads arriving again, over a parallel link's wire) and the goodput on the
// fallback channel against the same link's clean goodput just before the cut.
//
// An N300 (two chips, two parallel links) is launched with a fault plan that cuts M0D0P2's wire
// both ways `--cut-at` seconds after the link started, for good. The benchmark runs itself as the
// launch's client: it starts `ttemu link test M0D0P2` (a checked stream of 4 KiB payloads) and
// samples the receiving chip's link counters in its shared memory every 250 us meanwhile, giving
// a timeline of delivered bytes. The pause is the longest stretch with nothing delivered; the
// clean goodput is the rate over the `--window` before it, the fallback goodput the rate over
// the window after it. Every payload of the stream is checked at the receiver.
//
//   ttemu_bench_efc [--frames N] [--cut-at S] [--window S] [--transport udp|uring|shm] [--json]
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/job/job.hpp"
#include "launcher/control_requests.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t frames = 1500000;
  double cut_at = 0.8, window = 0.25;
  std::string transport = "udp";
  bool json = false, inside = false;
};

// Inside the launch: the stream, and the timeline of what the receiver got.
int inside(const Options& o) {
  const char* text = std::getenv("TTEMU_JOB");
  const auto job = text ? ttemu::job::JobId::parse(text) : std::nullopt;
  if (!job) {
    fmt::print(stderr, "ttemu_bench_efc --inside: no TTEMU_JOB (run by the benchmark itself)\n");
    return 2;
  }
  using ttemu::chip::Segment;
  const Segment rx_seg = Segment::open(ttemu::chip::segment_name(*job, {0, 1}, ttemu::chip::SegmentKind::kControl));
  const Segment tx_seg = Segment::open(ttemu::chip::segment_name(*job, {0, 0}, ttemu::chip::SegmentKind::kControl));
  const auto* rx = rx_seg.as<ttemu::chip::ChipControl>();
  const auto* tx = tx_seg.as<ttemu::chip::ChipControl>();
  auto delivered = [&] {  // payload bytes M0D1's links handed to its router, every port
    uint64_t bytes = 0;
    for (const auto& p : rx->ports) bytes += p.counters.bytes_rx.load(std::memory_order_relaxed);
    return bytes;
  };
  std::atomic<bool> done{false};
  std::string result;
  std::thread stream([&] {
    result = ttemu::bench::capture(fmt::format("{} link test M0D0P2 --frames {} --size 4096 --json", TTEMU_BINARY, o.frames));
    done = true;
  });
  std::vector<std::pair<double, uint64_t>> timeline;  // seconds since the start, bytes delivered
  const auto start = Clock::now();
  const uint64_t base = delivered();
  timespec next{};
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!done) {
    timeline.emplace_back(std::chrono::duration<double>(Clock::now() - start).count(), delivered() - base);
    next.tv_nsec += 250000;
    if (next.tv_nsec >= 1000000000) next.tv_sec += 1, next.tv_nsec -= 1000000000;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
  }
  stream.join();
  const json test = json::parse(result, nullptr, false);
  if (timeline.size() < 2 || timeline.back().second == 0) {
    fmt::print(stderr, "ttemu_bench_efc: the stream delivered nothing while it was sampled ({})\n", result);
    return 1;
  }
  // The longest stretch without a delivery, between the first and the last.
  size_t first = 0, last = timeline.size() - 1;
  while (first < timeline.size() && timeline[first].second == 0) ++first;
  while (last > first && timeline[last - 1].second == timeline[last].second) --last;
  size_t stall_from = first, stall_to = first;  // samples: last before the stall, first after it
  for (size_t i = first, since = first; i <= last && i < timeline.size(); ++i) {
    if (timeline[i].second != timeline[since].second) {
      if (timeline[i].first - timeline[since].first > timeline[stall_to].first - timeline[stall_from].first) {
        stall_from = since, stall_to = i;
      }
      since = i;
    }
  }
  // The rate over `window` seconds ending at sample `to` (backwards) or starting at `from`.
  auto rate = [&](size_t a, size_t b) {
    const double secs = timeline[b].first - timeline[a].first;
    return secs > 0 ? static_cast<double>(timeline[b].second - timeline[a].second) / secs : 0.0;
  };
  size_t clean_from = stall_from, fallback_to = stall_to;
  while (clean_from > first && timeline[stall_from].first - timeline[clean_from].first < o.window) --clean_from;
  while (fallback_to < last && timeline[fallback_to].first - timeline[stall_to].first < o.window) ++fallback_to;
  const bool on_fallback = tx->ports[2].wire.load() != 2;
  const double clean = rate(clean_from, stall_from), fallback = rate(stall_to, fallback_to);
  fmt::print("{}\n", json{{"pause_ms", (timeline[stall_to].first - timeline[stall_from].first) * 1e3},
                          {"clean_gb_per_s", clean / 1e9}, {"fallback_gb_per_s", fallback / 1e9},
                          {"fallback_vs_clean", clean > 0 ? fallback / clean : 0.0},
                          {"clean_window_s", timeline[stall_from].first - timeline[clean_from].first},
                          {"fallback_window_s", timeline[fallback_to].first - timeline[stall_to].first},
                          {"cut_seen_at_s", timeline[stall_from].first}, {"on_fallback_at_end", on_fallback},
                          {"samples", timeline.size()},
                          {"verified", test.is_object() ? test.value("verified", 0.0) * 4096 : 0.0},
                          {"errors", test.is_object() ? test.value("errors", 0.0) * 4096 : -1.0},
                          {"frames", o.frames}}.dump());
  return 0;
}

int outside(const Options& o) {
  const ttemu::bench::ScratchFile plan(fmt::format(
      "links:\n  - link: M0D0P2\n    direction: both\n    down: [{{at: {}, for: 100000}}]\n", o.cut_at));
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = 0;
  const auto docs = ttemu::bench::launch_json(
      TTEMU_BINARY, TTEMU_TOPOLOGIES "/n300.yaml", fmt::format("--transport {} --faults {}", o.transport, plan.path()),
      fmt::format("{} --inside --frames {} --window {}", self, o.frames, o.window));
  if (docs.empty()) {
    fmt::print(stderr, "ttemu_bench_efc: the run inside the launch printed no result\n");
    return 1;
  }
  json r = docs.back();
  r["transport"] = o.transport;
  r["cut_at_s"] = o.cut_at;
  const bool cut_in_stream = r["cut_seen_at_s"].get<double>() > 0 && r["fallback_window_s"].get<double>() > 0;
  const bool ok = r["errors"].get<double>() == 0 && r["verified"].get<double>() == static_cast<double>(o.frames) * 4096 &&
                  r["on_fallback_at_end"].get<bool>() && cut_in_stream;
  if (o.json) {
    fmt::print("{}\n", r.dump());
  } else {
    fmt::print("The fallback channel under a cut (N300, M0D0P2 cut {} s after the link started, --transport {})\n",
               o.cut_at, o.transport);
    fmt::print("  {:<52} {:>9.1f} ms\n", "pause: cut to payloads arriving over M0D0P3's wire", r["pause_ms"].get<double>());
    fmt::print("  {:<52} {:>9.3f} GB/s  (over the {:.2f} s before the cut)\n", "clean goodput of M0D0P2's link",
               r["clean_gb_per_s"].get<double>(), r["clean_window_s"].get<double>());
    fmt::print("  {:<52} {:>9.3f} GB/s  (over the {:.2f} s after the pause)\n", "goodput on the fallback channel",
               r["fallback_gb_per_s"].get<double>(), r["fallback_window_s"].get<double>());
    fmt::print("  {:<52} {:>9.2f}\n", "fallback / clean", r["fallback_vs_clean"].get<double>());
    fmt::print("  (stream of {} payloads of 4 KiB: verified {} bytes, errors {}; on the fallback channel at the end: {})\n",
               o.frames, r["verified"].get<double>(), r["errors"].get<double>(), r["on_fallback_at_end"].get<bool>());
    if (!cut_in_stream) fmt::print("  the cut did not fall inside the stream: raise --frames or lower --cut-at\n");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The Ethernet Fallback Channel under a cut: the pause, and goodput on the fallback channel", "ttemu_bench_efc"};
  // Bounds: what `ttemu link test --frames` accepts; seconds up to a day. A window below 1 ms
  // holds fewer than four of the 250 us samples.
  app.add_option("--frames", o.frames, "4 KiB payloads in the stream")
      ->check(ttemu::bench::whole_number<uint64_t>(1, ttemu::launcher::kMaxStreamFrames))->capture_default_str();
  app.add_option("--cut-at", o.cut_at, "Seconds after the link started that its wire is cut")
      ->check(ttemu::bench::number_in(0, 86400))->capture_default_str();
  app.add_option("--window", o.window, "Seconds of goodput measured before the cut and after the pause")
      ->check(ttemu::bench::number_in(0.001, 86400))->capture_default_str();
  ttemu::bench::add_transport(app, o.transport, "How the chips' links move datagrams");
  app.add_flag("--json", o.json, "Print one JSON object");
  app.add_flag("--inside", o.inside, "The stream and its timeline, inside the launched system")->group(ttemu::bench::kInternal);
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  return o.inside ? inside(o) : outside(o);
}
