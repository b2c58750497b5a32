// The CPU's kernels (reduce/), as the transports take them for receives that combine or stream
// (transport/pair.h's ReceiveKernels): the algorithms hand these to every such receive.
#pragma once

#include "backend/transport/pair.h"

namespace ringx::algorithms {

const transport::ReceiveKernels& cpuReceiveKernels();

}  // namespace ringx::algorithms
