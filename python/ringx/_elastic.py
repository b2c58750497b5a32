"""Going on without a dead rank: ringx.shrink_group.

On torch >= 2.10 it is torch's own dist.shrink_group, which ringx's backend serves (a new ringx
group over the remaining ranks, renumbered; see ProcessGroupRingx::shrinkTo). torch registers
the new group's backend under its GLOO type for CPU (it names no other CPU backend), but the
backend is ringx's: dist.get_backend() still says "ringx", and every collective runs on ringx.
"""

import torch.distributed as dist

SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01  # fail the group's work in flight first (as abort does), then shrink


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """A new group of `group`'s ranks (the default group when None) without `ranks_to_exclude`
    (ranks of that group), renumbered in order; shrinking the default group makes the new one
    the default and ends every other group, as torch's dist.shrink_group does. Only the
    remaining ranks call it. A remaining rank that does not take part within the group's
    timeout (or pg_options.timeout) is an error naming it: shrink again without it."""
    if not hasattr(dist, "shrink_group"):
        raise NotImplementedError(
            f"ringx.shrink_group needs torch 2.10 or newer (dist.shrink_group), and this is "
            f"torch {__import__('torch').__version__}; restart the job without the dead rank "
            f"(torchrun) instead")
    return dist.shrink_group(ranks_to_exclude, group=group, shrink_flags=shrink_flags,
                             pg_options=pg_options)
