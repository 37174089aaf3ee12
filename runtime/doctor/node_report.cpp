#include "runtime/doctor/node_report.h"

#include <unistd.h>

#include <algorithm>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace shardtrain::doctor {

const char* name_of(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "fail";
  }
  return "?";
}

Environment process_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

void NodeReport::add(std::string check, Verdict verdict, std::string detail, std::string advice) {
  findings.push_back({std::move(check), verdict, std::move(detail), std::move(advice)});
}

void NodeReport::recommend(const std::string& name, const std::string& value) {
  for (auto& [n, v] : environment)
    if (n == name) {
      v = value;
      return;
    }
  environment.emplace_back(name, value);
}

Verdict NodeReport::worst() const {
  Verdict w = Verdict::ok;
  for (const Finding& f : findings) w = std::max(w, f.verdict);
  return w;
}

nlohmann::json to_json(const NodeReport& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : r.findings)
    findings.push_back(
        {{"check", f.check}, {"verdict", name_of(f.verdict)}, {"detail", f.detail}, {"advice", f.advice}});
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [n, v] : r.environment) env.push_back({{"name", n}, {"value", v}});
  return {
      {"host", r.host},  {"rank", r.rank}, {"findings", findings}, {"environment", env}, {"fingerprint", r.fingerprint},
      {"facts", r.facts}};
}

NodeReport node_report_from_json(const nlohmann::json& j) {
  NodeReport r;
  r.host = j.at("host").get<std::string>();
  r.rank = j.at("rank").get<int>();
  for (const auto& f : j.at("findings")) {
    const std::string v = f.at("verdict").get<std::string>();
    const Verdict verdict = v == "fail" ? Verdict::fail : v == "warn" ? Verdict::warn : Verdict::ok;
    r.add(f.at("check").get<std::string>(), verdict, f.at("detail").get<std::string>(),
          f.at("advice").get<std::string>());
  }
  for (const auto& e : j.at("environment"))
    r.environment.emplace_back(e.at("name").get<std::string>(), e.at("value").get<std::string>());
  r.fingerprint = j.at("fingerprint").get<std::map<std::string, std::string>>();
  r.facts = j.at("facts");
  return r;
}

}  // namespace shardtrain::doctor
