#include "trace/format/schema.h"

namespace ringx::trace {

const char* categoryName(Category category) {
  switch (category) {
    case Category::kCollective:
      return "collective";
    case Category::kDdp:
      return "ddp";
    case Category::kFsdp:
      return "fsdp";
    case Category::kMemory:
      return "memory";
    case Category::kStep:
      return "step";
    case Category::kUser:
      return "user";
    case Category::kDevice:
      return "device";
  }
  return "unknown";
}

const char* eventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kSpan:
      return "span";
    case EventKind::kInstant:
      return "instant";
    case EventKind::kCounter:
      return "counter";
  }
  return "unknown";
}

bool arg::isSteadyTime(std::string_view key) {
  for (const char* k : kSteadyTimes)
    if (key == k) return true;
  return false;
}

bool parseCategory(std::string_view name, Category* out) {
  for (int i = 1; i <= kCategoryCount; ++i) {
    if (name == categoryName(static_cast<Category>(i))) {
      *out = static_cast<Category>(i);
      return true;
    }
  }
  return false;
}

}  // namespace ringx::trace
