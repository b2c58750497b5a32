// JSON text: string literals written by hand (the Chrome exporter and the trace manifest stream
// their JSON as text rather than build a document), and the UTF-8 validity rule that writing
// and the Chrome importer share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringx {

// Appends `text` to `out` as a JSON string literal, quotes included: escapes
// quotes, backslashes and control characters, and replaces bytes that are not
// valid UTF-8 with U+FFFD (JSON readers reject them).
void appendJsonString(std::string& out, std::string_view text);

// Length of the valid UTF-8 sequence at p (1 for ASCII; at most `left` bytes), 0 if invalid:
// overlong forms, surrogates and code points above U+10FFFF are invalid.
size_t utf8SequenceLength(const unsigned char* p, size_t left);

}  // namespace ringx
