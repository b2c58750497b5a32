"""A group's timeout set through torch reaches ringx, on every torch release ringx supports.

torch 2.9 to 2.13 set it with `torch.distributed.distributed_c10d._set_pg_timeout(timeout,
group)`, which hands it only to the backends it knows by class (ProcessGroupGloo,
ProcessGroupNCCL): on a ringx group it warns "Set timeout is now only supported for either nccl
or gloo." and changes nothing. torch 2.14 made it public as `dist.set_timeout`, which calls
`ProcessGroup.set_timeout`, and that calls every backend's setTimeout, ringx's included
(ProcessGroupRingx::setTimeout); `_set_pg_timeout` became a deprecated alias of it.

So `import ringx` replaces `_set_pg_timeout` where torch has no `set_timeout` (the one release
difference, decided here): the ringx backends of the group take the timeout themselves, and
torch's own function still does the rest (gloo or NCCL beside ringx, "cpu:ringx,cuda:nccl"),
with its own checks and warnings. Where torch has `set_timeout`, nothing is replaced.
"""

import functools

import torch.distributed as dist

from ._C import ProcessGroupRingx


def _backends(group):
    """The group's backends, split into ringx's and the others (each backend once: one may
    serve several devices)."""
    ringx, others, seen = [], [], set()
    for device in group._device_types:
        backend = group._get_backend(device)
        if id(backend) in seen:
            continue
        seen.add(id(backend))
        (ringx if isinstance(backend, ProcessGroupRingx) else others).append(backend)
    return ringx, others


def install():
    c10d = dist.distributed_c10d
    if hasattr(c10d, "set_timeout"):  # torch >= 2.14: ProcessGroup.set_timeout reaches ringx
        return
    original = c10d._set_pg_timeout

    @functools.wraps(original)
    def _set_pg_timeout(timeout, group=None):
        pg = group if group is not None else c10d._get_default_group()
        if c10d._rank_not_in_group(pg) or not isinstance(pg, dist.ProcessGroup):
            return original(timeout, group)  # torch's own error
        ringx, others = _backends(pg)
        for backend in ringx:
            backend.set_timeout(timeout)
        if others or not ringx:
            original(timeout, group)

    c10d._set_pg_timeout = _set_pg_timeout
