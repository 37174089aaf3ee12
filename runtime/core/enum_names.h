// Names of an enum's values, for configuration and messages: one table per
// enum, next to the enum, found by argument-dependent lookup:
//   std::span<const EnumName<E>> enum_names(E);
// Parsing, printing (through fmt, "{}" prints the name, and into JSON, as
// the name rather than a number) and the list of valid choices all read that
// table, so a new value is one row.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shardtrain {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E>
concept NamedEnum = requires(E e) {
  { enum_names(e) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

template <NamedEnum E>
std::string_view name_of(E value) {
  for (const EnumName<E>& n : enum_names(E{}))
    if (n.value == value) return n.name;
  return "?";
}

template <NamedEnum E>
std::optional<E> parse_enum(std::string_view name) {
  for (const EnumName<E>& n : enum_names(E{}))
    if (n.name == name) return n.value;
  return std::nullopt;
}

// "\"a\", \"b\" or \"c\"": the valid names, for an error message.
template <NamedEnum E>
std::string enum_choices() {
  const auto names = enum_names(E{});
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += '"';
    out += names[i].name;
    out += '"';
  }
  return out;
}

}  // namespace shardtrain

template <typename E>
requires shardtrain::NamedEnum<E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(E value, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(shardtrain::name_of(value), ctx);
  }
};

template <typename E>
requires shardtrain::NamedEnum<E>
struct nlohmann::adl_serializer<E, void> {
  template <typename Json>
  static void to_json(Json& j, E value) {
    j = std::string(shardtrain::name_of(value));
  }
};
