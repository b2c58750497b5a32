#include "trace/format/dtype_size.h"

#include <cctype>
#include <string>

namespace ringx::trace {

int64_t dtypeBytes(std::string_view dtype) {
  std::string t;  // lower case, without "c10::", underscores and spaces
  if (dtype.substr(0, 5) == "c10::") dtype.remove_prefix(5);
  for (char c : dtype) {
    if (c != '_' && c != ' ') t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  auto has = [&](const char* part) { return t.find(part) != std::string::npos; };
  if (has("float8") || has("byte") || has("char") || has("bool") || t == "int8" || t == "uint8") {
    return 1;
  }
  if (has("bfloat16") || has("half") || has("float16") || has("short") || has("int16")) return 2;
  if (has("double") || has("long") || has("64") || has("complex32")) return 8;
  if (has("complex")) return 16;
  if (has("float") || has("int")) return 4;
  return 0;
}

}  // namespace ringx::trace
