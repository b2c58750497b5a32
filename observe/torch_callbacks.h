// Where the observer of torch's own engines meets torch: one global RecordFunction callback
// (USER_SCOPE: record_function scopes and every c10d Work's profiling scope; BACKWARD_FUNCTION:
// autograd nodes), ringx's issue listener, and the autograd engine's final callbacks. Installed
// while tracing records and a torch engine runs (python/ringx/_watch.py asks at each forward of
// torch's DDP and FSDP2's root), removed when tracing stops (the recorder's state listener): a
// job that does not trace, or trains with ringx's own engines, pays nothing; while installed, a
// scope or node it does not record costs a name check.
#pragma once

#include <chrono>
#include <memory>

#include "ddp/watch/ddp_watch.h"
#include "fsdp/watch/fsdp_watch.h"

namespace ringx::observe {

// Follows tracing: called once when the _C module loads.
void followTracing();
// Installs the callbacks if tracing records and they are not yet; whether they are installed.
bool watchTorchEngines();
// Whether the callbacks are installed now (tests).
bool installed();

// The DDP watch whose backward comes next (the Python wrapper calls it after a forward that
// syncs gradients); the callbacks feed it until its iteration is recorded.
void watchBackwardOf(std::shared_ptr<DdpWatch> watch);

// Waits (at most `limit`) until the collectives the watches saw issued have finished and are
// recorded: what stopping a recording does first, since on a GPU they finish after the Python
// that issued them returned.
void settleWatches(std::chrono::milliseconds limit);

// The FSDP2 watch of this recording (nullptr when not tracing): FSDP2's scopes feed it; Python
// gives it the units' sizes once the root's lazy init has made them.
std::shared_ptr<FsdpWatch> fsdpWatch();

}  // namespace ringx::observe
