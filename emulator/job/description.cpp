#include "emulator/job/description.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"

namespace ttemu::job {

using nlohmann::json;

json to_json(const SystemDescription& d) {
  json chips = json::array();
  for (const auto& c : d.chips) {
    chips.push_back({{"name", c.name}, {"mesh", c.mesh}, {"device", c.device}, {"arch", c.arch}, {"row", c.row},
                     {"col", c.col}, {"mesh_rows", c.mesh_rows}, {"mesh_cols", c.mesh_cols},
                     {"l1_bytes", c.l1_bytes}, {"dram_bytes", c.dram_bytes}, {"tensix_cores", c.tensix_cores},
                     {"tensix_l1", c.tensix_l1}, {"host", c.host}});
  }
  json links = json::array();
  for (const auto& l : d.links) links.push_back({{"a", l.a}, {"b", l.b}, {"plane", l.plane}});
  return {{"job", d.job.text()}, {"system_path", d.system_path}, {"planes", d.planes}, {"data_fvcs", d.data_fvcs},
          {"memory", d.memory}, {"this_host", d.this_host}, {"chips", chips}, {"links", links}};
}

namespace {

// A required field of the right type, or an Error naming the source and the field.
template <class T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(fmt::format("{}: '{}' is missing", where, key));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("{}: '{}' has the wrong type", where, key));
  }
}

}  // namespace

SystemDescription description_from_json(const json& j, const std::string& source) {
  SystemDescription d;
  auto job = JobId::parse(field<std::string>(j, "job", source));
  if (!job) throw Error(fmt::format("{}: 'job' is not a job id", source));
  d.job = *job;
  d.system_path = field<std::string>(j, "system_path", source);
  d.planes = field<int>(j, "planes", source);
  d.data_fvcs = field<int>(j, "data_fvcs", source);
  d.memory = field<std::string>(j, "memory", source);
  if (d.memory != "open" && d.memory != "protected") throw Error(fmt::format("{}: 'memory' is neither open nor protected", source));
  d.this_host = field<std::string>(j, "this_host", source);
  const auto chips = field<json>(j, "chips", source);
  if (!chips.is_array() || chips.empty()) throw Error(fmt::format("{}: 'chips' is not a list of chips", source));
  for (size_t i = 0; i < chips.size(); ++i) {
    const auto& c = chips[i];
    const std::string where = fmt::format("{}: chips[{}]", source, i);
    d.chips.push_back({field<std::string>(c, "name", where), field<uint16_t>(c, "mesh", where),
                       field<uint16_t>(c, "device", where), field<std::string>(c, "arch", where),
                       field<int>(c, "row", where), field<int>(c, "col", where), field<int>(c, "mesh_rows", where),
                       field<int>(c, "mesh_cols", where), field<uint64_t>(c, "l1_bytes", where),
                       field<uint64_t>(c, "dram_bytes", where), field<int>(c, "tensix_cores", where),
                       field<uint64_t>(c, "tensix_l1", where), field<std::string>(c, "host", where)});
  }
  const auto links = field<json>(j, "links", source);
  if (!links.is_array()) throw Error(fmt::format("{}: 'links' is not a list", source));
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string where = fmt::format("{}: links[{}]", source, i);
    d.links.push_back({field<std::string>(links[i], "a", where), field<std::string>(links[i], "b", where),
                       field<int>(links[i], "plane", where)});
  }
  return d;
}

void publish(const SystemDescription& d) {
  const std::string path = description_path(d.job);
  const std::string tmp = path + ".tmp";
  const std::string text = to_json(d).dump(1) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(fmt::format("{}: cannot write the system description", tmp));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot write the system description", path));
  }
}

SystemDescription read_description(const JobId& job) {
  const std::string path = description_path(job);
  if (::access(path.c_str(), F_OK) != 0) {
    throw Error(fmt::format("{}: job {} has published no system description (is it still starting?)", path, job.text()));
  }
  const json j = json::parse(read_text_file(path), nullptr, false);
  if (j.is_discarded()) throw Error(fmt::format("{}: not valid JSON", path));
  return description_from_json(j, path);
}

void unpublish(const JobId& job) { ::unlink(description_path(job).c_str()); }

}  // namespace ttemu::job
