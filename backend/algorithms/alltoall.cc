// All-to-all with per-peer sizes (alltoall_base with split sizes, alltoall).
//
// Every rank posts its n-1 sends and n-1 receives at once, starting with the
// rank after itself so that at any moment the ranks are spread over different
// peers, and the progress loop moves them all concurrently. Every pair of ranks
// agrees on its byte count in the handshake, so mismatched split sizes are an
// error on both sides rather than a truncated tensor.
#include <cstring>

#include "backend/algorithms/algorithms.h"
#include "base/bytes.h"

namespace ringx::algorithms {

void alltoall(Collective& c, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendBytes, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvBytes) {
  c.setAlgorithm("direct");
  const int n = c.size();
  const int r = c.rank();
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  RINGX_CHECK(sendBytes[r] == recvBytes[r], "alltoall: rank ", r, " sends ", sendBytes[r],
              " bytes to itself but expects ", recvBytes[r]);
  for (int i = 1; i < n; ++i) {
    int to = (r + i) % n;
    int from = (r - i + n) % n;
    c.announce(to, sendBytes[to]);
    c.send(to, in + sendOffsets[to], sendBytes[to]);
    c.expect(from, recvBytes[from]);
    c.recv(from, out + recvOffsets[from], recvBytes[from]);
  }
  copyBytes(out + recvOffsets[r], in + sendOffsets[r], sendBytes[r]);
  c.finish();
}

}  // namespace ringx::algorithms
