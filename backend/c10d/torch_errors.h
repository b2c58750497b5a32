// ringx's errors as the exception types torch users catch (torch 2.x):
//   - a collective or point-to-point operation that failed (a peer lost, stuck or sending
//     garbage, a timeout, a mismatch found across ranks) -> c10::DistBackendError, which
//     Python sees as torch.distributed.DistBackendError, as ProcessGroupNCCL raises it;
//   - a failure to set up the group's connections -> c10::DistNetworkError
//     (torch.distributed.DistNetworkError);
//   - torch's own errors (a store's DistStoreError, TORCH_CHECK's bad-argument errors) pass
//     through unchanged.
// Both are RuntimeError subclasses in Python, so code that catches RuntimeError (as for gloo)
// still does. The message is ringx's, unchanged: rank, collective, seq and peer stay readable.
#pragma once

#include <exception>

namespace ringx::c10d_glue {

// The error a failed Work reports.
std::exception_ptr asBackendError(std::exception_ptr error);
// The error a failed group setup reports.
std::exception_ptr asNetworkError(std::exception_ptr error);

}  // namespace ringx::c10d_glue
