#include "runtime/nn/model_registry.h"

#include "runtime/core/error.h"
#include "runtime/nn/models.h"

#include <fmt/ranges.h>

#include <cmath>
#include <mutex>

namespace shardtrain::nn {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, ModelDefinition, std::less<>> models;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string option_names(const std::vector<ModelOption>& options) {
  std::vector<std::string> names;
  names.reserve(options.size());
  for (const ModelOption& o : options) names.push_back(o.name);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

ModelContext::ModelContext(const ModelSpec& spec, const std::vector<ModelOption>& declared, const Shape& input_sample,
                           int64_t num_classes)
    : spec_(spec), declared_(declared), input_sample_(input_sample), num_classes_(num_classes) {}

double ModelContext::option(std::string_view name) const {
  for (const ModelOption& o : declared_) {
    if (o.name != name) continue;
    const auto set = spec_.options.find(o.name);
    return set == spec_.options.end() ? o.default_value : set->second;
  }
  throw Error(fmt::format("model \"{}\" asked for option \"{}\", which it does not declare (it declares: {})",
                          spec_.name, name, option_names(declared_)));
}

int64_t ModelContext::int_option(std::string_view name) const {
  const double v = option(name);
  ST_CHECK(std::nearbyint(v) == v && std::fabs(v) < 9.0e15, "model.options.{} must be a whole number, got {}", name, v);
  return int64_t(v);
}

void register_model(const std::string& name, ModelDefinition definition) {
  ST_CHECK(!name.empty(), "register_model: a model needs a name");
  ST_CHECK(definition.build != nullptr, "register_model(\"{}\"): the definition has no builder", name);
  for (size_t i = 0; i < definition.options.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      ST_CHECK(definition.options[i].name != definition.options[j].name,
               "register_model(\"{}\"): option \"{}\" is declared twice", name, definition.options[i].name);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  ST_CHECK(!r.models.contains(name), "register_model: a model named \"{}\" is registered already", name);
  r.models.emplace(name, std::move(definition));
}

const ModelDefinition* find_model(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const auto it = r.models.find(name);
  // Definitions are never removed: the pointer stays valid.
  return it == r.models.end() ? nullptr : &it->second;
}

std::vector<std::string> registered_models() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  names.reserve(r.models.size());
  for (const auto& [name, definition] : r.models) names.push_back(name);
  return names;
}

const ModelDefinition& checked_model(std::string_view name, const std::map<std::string, double>& options) {
  const ModelDefinition* d = find_model(name);
  if (!d) {
    const std::vector<std::string> names = registered_models();
    if (!names.empty())
      throw Error(
          fmt::format("model.kind = \"custom\": no model named \"{}\" is registered in this program (it "
                      "registers {})",
                      name, fmt::join(names, ", ")));
    throw Error(
        fmt::format("model.kind = \"custom\": no model named \"{}\" is registered in this program, which "
                    "registers none. A custom model is registered by a program of your own that trains it "
                    "(nn::register_model, before it loads the config), not by the shardtrain program: "
                    "docs/custom-models.md, examples/custom_model",
                    name));
  }
  for (const auto& [key, value] : options) {
    bool declared = false;
    for (const ModelOption& o : d->options) declared |= o.name == key;
    ST_CHECK(declared, "unknown config key model.options.{}: model \"{}\" takes {}", key, name,
             option_names(d->options));
  }
  return *d;
}

}  // namespace shardtrain::nn
