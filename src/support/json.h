// JSON for ferrite's result files (run.json, bench and conformance reports, traces), through
// nlohmann-json.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace ferrite {

// Keys stay in the order they were written.
using Json = nlohmann::ordered_json;

// Bytes that are not UTF-8 (a path or a node name may hold any) become U+FFFD instead of an
// exception.

// `j` indented by two spaces ("key": value), ending in a newline: the result files.
inline std::string json_text(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// `j` on one line without spaces or newline: one event of a trace.
inline std::string json_line(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A JSON number, or null where `v` is not finite (JSON has no NaN or infinity).
inline Json json_number(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

}  // namespace ferrite
