// libFuzzer target: the plain-data pickle reader (trace/read/pickle_data.h) that
// `ringx-trace why` runs on torch's Flight Recorder dumps, files from anywhere. Any bytes must
// read or be a clear ringx error (a refused class among them), never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "trace/read/pickle_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ringx::trace::readPickleData(std::string_view(reinterpret_cast<const char*>(data), size),
                                 "fuzz.pkl");
  } catch (const ringx::Error&) {
  }
  return 0;
}
