// The typed description of a running system that its launcher publishes for clients (worker
// programs, `ttemu traffic`): what they need to address its chips and read their memory,
// without asking the launcher, parsing its display output, or guessing. Written once the
// chips' memory exists, as JSON in the job's runtime directory (description_path), readable
// only by the user; removed with the job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/job/job.hpp"

namespace ttemu::job {

struct ChipDescription {
  std::string name;  // MxDy
  uint16_t mesh = 0, device = 0;
  std::string arch;  // wormhole_b0, blackhole
  int row = 0, col = 0, mesh_rows = 0, mesh_cols = 0;
  uint64_t l1_bytes = 0, dram_bytes = 0;
  int tensix_cores = 0;     // workers are Tensix cores 0 .. tensix_cores-1
  uint64_t tensix_l1 = 0;   // bytes of L1 per Tensix core; core c's starts at c * tensix_l1
  std::string host;  // the host that runs it (the spec's host_mapping, or placed: control/host_placement.hpp)
};

struct LinkDescription {
  std::string a, b;  // its two ends, MxDyPz
  int plane = 0;
};

struct SystemDescription {
  JobId job;
  std::string system_path;  // the system specification, absolute
  int planes = 0;
  int data_fvcs = 0;
  std::string memory = "open";  // open | protected: whether RDMA packets need memory keys
  // The host this description was published on, when the system is spread over several
  // (multi-host launch): the chips whose `host` is this one have their memory here. Empty:
  // one host has every chip.
  std::string this_host;
  std::vector<ChipDescription> chips;
  std::vector<LinkDescription> links;
};

nlohmann::json to_json(const SystemDescription& d);
// Every field is required and checked; throws Error naming `source` and the field.
SystemDescription description_from_json(const nlohmann::json& j, const std::string& source);

// Writes the description where clients look for it (atomically: a reader sees all or nothing).
void publish(const SystemDescription& d);
// The description of a running job; throws Error naming the file when it is missing or bad.
SystemDescription read_description(const JobId& job);
void unpublish(const JobId& job);

}  // namespace ttemu::job
