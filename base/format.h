// How ringx prints durations, byte counts and sets of ranks, and reads a set of ranks back:
// one definition for every message, report and tool, so that "1.50 ms" or "ranks 0-7" reads the
// same in an error, `ringx-trace summary` and the viewer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringx {

// "850 ns", "12.3 us", "4.56 ms", "1.23 s".
std::string formatDuration(int64_t ns);
// The same with its sign always shown: "+12.3 us", "-850 ns" (deltas, offsets).
std::string formatSignedDuration(int64_t ns);
// "512 B", "12.3 KiB", "4.50 MiB", "1.20 GiB".
std::string formatBytes(int64_t bytes);

// "rank 2", "ranks 0, 1, 3", "ranks 0-7, 9, 12-15": runs of three or more
// consecutive ranks print as ranges, so a 1,024-rank list stays one line.
// `ranks` ascending.
std::string rankList(const std::vector<int32_t>& ranks);
// Reads what a user types for a set of ranks, "0-7,9,12-15" (spaces allowed,
// a leading "rank"/"ranks" too, so rankList's text reads back): the ranks,
// ascending and without repeats. False, with `error` saying what is wrong, for
// anything else (an empty list, a range that runs backwards).
bool parseRankList(std::string_view text, std::vector<int32_t>* ranks, std::string* error);

}  // namespace ringx
