#include "runtime/doctor/open_mpi_params.h"

#include <sstream>

namespace shardtrain::doctor {
namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::optional<std::string> param_in_file(const SysRoot& sys, const std::string& file, const std::string& name) {
  const auto text = sys.read(file);
  if (!text) return std::nullopt;
  std::optional<std::string> value;  // the last line naming it wins, as in Open MPI
  std::stringstream ss(*text);
  for (std::string line; std::getline(ss, line);) {
    line = trim(line.substr(0, line.find('#')));
    const size_t eq = line.find('=');
    if (eq == std::string::npos || trim(line.substr(0, eq)) != name) continue;
    value = trim(line.substr(eq + 1));
  }
  return value;
}

}  // namespace

std::optional<McaSetting> open_mpi_param(const SysRoot& sys, const Environment& env, const std::string& name) {
  if (const auto it = env.find("OMPI_MCA_" + name); it != env.end()) return McaSetting{it->second, it->first};
  std::vector<std::string> files;
  if (const auto home = env.find("HOME"); home != env.end())
    files.push_back(home->second + "/.openmpi/mca-params.conf");
  // A relocated Open MPI (the GPU bundle's env.sh) names its configuration folder.
  if (const auto conf = env.find("OPAL_SYSCONFDIR"); conf != env.end()) {
    files.push_back(conf->second + "/openmpi-mca-params.conf");
  } else if (const auto prefix = env.find("OPAL_PREFIX"); prefix != env.end()) {
    files.push_back(prefix->second + "/etc/openmpi-mca-params.conf");
  }
  files.emplace_back("/etc/openmpi/openmpi-mca-params.conf");    // Debian, Ubuntu
  files.emplace_back("/usr/local/etc/openmpi-mca-params.conf");  // built from source
  for (const auto& f : files)
    if (auto v = param_in_file(sys, f, name)) return McaSetting{*v, f};
  return std::nullopt;
}

bool mca_list_excludes(const std::string& list, const std::string& component) {
  if (list.empty()) return false;
  const bool negated = list[0] == '^';
  std::stringstream ss(negated ? list.substr(1) : list);
  bool listed = false;
  for (std::string item; std::getline(ss, item, ',');) listed = listed || trim(item) == component;
  return negated ? listed : !listed;
}

std::vector<std::pair<std::string, std::string>> parse_ucx_devices(const std::string& out) {
  std::vector<std::pair<std::string, std::string>> found;
  std::string transport;
  std::stringstream ss(out);
  for (std::string line; std::getline(ss, line);) {
    std::string t = trim(line);
    if (!t.empty() && t[0] == '#') t = trim(t.substr(1));
    if (t.rfind("Transport:", 0) == 0) transport = trim(t.substr(10));
    if (t.rfind("Device:", 0) == 0 && !transport.empty()) found.emplace_back(transport, trim(t.substr(7)));
  }
  return found;
}

}  // namespace shardtrain::doctor
