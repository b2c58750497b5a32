// Plain data out of a Python pickle (protocols 0 to 5): None, bools, ints, floats, strings,
// bytes, lists, tuples, dicts and sets, as JSON values (tuples and sets become arrays, bytes
// strings, dict keys their text). Anything that asks for a class (GLOBAL, REDUCE, BUILD, NEWOBJ,
// persistent ids, out-of-band buffers) is refused: loading it would run code, and the files read
// this way (torch's Flight Recorder dumps) hold only plain data. What pickletools.dis documents
// is what this follows.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ringx::trace {

// Throws FormatError naming `source` and the byte offset for text that is not a pickle, for a
// truncated one, and for one that asks for a class (naming it).
nlohmann::json readPickleData(std::string_view bytes, const std::string& source);

// Whether `head` (a file's first bytes) starts like a pickle of protocol 2 or later.
bool looksLikePickle(std::string_view head);

}  // namespace ringx::trace
