// Real traces written by other projects, which tests read where they are kept: the shared
// folder beside the project (../shared/traces from its root; CI has it too), or
// $RINGX_SHARED_TRACES. They are never copied into the project (../shared/traces/README.md
// says where each comes from). A test that needs one fails, not skips, when it is missing.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace ringx::testing {

inline std::filesystem::path sharedTracesDir() {
  if (const char* env = std::getenv("RINGX_SHARED_TRACES"); env && *env) return env;
  return (std::filesystem::path(__FILE__).parent_path() / "../../../shared/traces")
      .lexically_normal();
}

// The path of `relative` under the shared traces; throws when it is not there.
inline std::string sharedTrace(const std::string& relative) {
  const std::filesystem::path path = sharedTracesDir() / relative;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error("the shared test trace " + path.string() +
                             " is missing: the project's tests read real traces from "
                             "../shared/traces (or set RINGX_SHARED_TRACES to that folder)");
  }
  return path.string();
}

}  // namespace ringx::testing
