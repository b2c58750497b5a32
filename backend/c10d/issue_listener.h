// Who hears of every ringx Work as it is issued, on the issuing thread: the observer of
// torch's own engines (observe/, ddp/watch, fsdp/watch) takes from it when the wire ran a DDP
// bucket's or an FSDP2 unit's collective, and its sequence number. One listener; nullptr: none.
#pragma once

#include <c10/util/intrusive_ptr.h>

namespace ringx::c10d_glue {

class RingxWork;

using IssueListener = void (*)(const c10::intrusive_ptr<RingxWork>& work);
void setIssueListener(IssueListener listener);
// Called by ProcessGroupRingx for each Work it returns (collectives and point-to-point).
void notifyIssued(const c10::intrusive_ptr<RingxWork>& work);

}  // namespace ringx::c10d_glue
