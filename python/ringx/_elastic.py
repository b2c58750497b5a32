"""Going on without a dead rank: ringx.shrink_group.

On torch >= 2.10 it is torch's own dist.shrink_group, which ringx's backend serves (a new ringx
group over the remaining ranks, renumbered; see ProcessGroupRingx::shrinkTo). torch registers
the new group's backend under its GLOO type for CPU (it names no other CPU backend), but the
backend is ringx's: dist.get_backend() still says "ringx", and every collective runs on ringx.

torch 2.9 has no dist.shrink_group: there ringx.shrink_group does torch's part itself, as
2.10's does it (the same checks, the same bookkeeping of torch.distributed's groups), over the
same backend call.
"""

from datetime import timedelta

import torch
import torch.distributed as dist

SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01  # fail the group's work in flight first (as abort does), then shrink


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """A new group of `group`'s ranks (the default group when None) without `ranks_to_exclude`
    (ranks of that group), renumbered in order; shrinking the default group makes the new one
    the default and ends every other group, as torch's dist.shrink_group does. Only the
    remaining ranks call it. A remaining rank that does not take part within the group's
    timeout (or pg_options.timeout) is an error naming it: shrink again without it."""
    if hasattr(dist, "shrink_group"):
        return dist.shrink_group(ranks_to_exclude, group=group, shrink_flags=shrink_flags,
                                 pg_options=pg_options)
    return _shrink_group_here(ranks_to_exclude, group, shrink_flags, pg_options)


def _shrink_group_here(ranks_to_exclude, group, shrink_flags, pg_options):
    """dist.shrink_group's part on a torch without it (2.9). The backend checks the ranks."""
    from ._C import ProcessGroupRingx

    c10d = dist.distributed_c10d
    if not isinstance(ranks_to_exclude, list) or not all(
            isinstance(r, int) for r in ranks_to_exclude):
        raise TypeError(f"ranks_to_exclude must be a list of ranks (ints) of the group, not "
                        f"{ranks_to_exclude!r}; for example [3]")
    if shrink_flags not in (SHRINK_DEFAULT, SHRINK_ABORT):
        raise ValueError(f"shrink_flags must be ringx.SHRINK_DEFAULT ({SHRINK_DEFAULT}) or "
                         f"ringx.SHRINK_ABORT ({SHRINK_ABORT}), not {shrink_flags!r}")
    default = c10d._get_default_group()
    target = group if group is not None else default
    backend = target._get_backend(torch.device("cpu"))
    if not isinstance(backend, ProcessGroupRingx):
        raise TypeError(f"ringx.shrink_group shrinks ringx groups; group "
                        f"'{c10d._get_process_group_name(target)}' runs "
                        f"{dist.get_backend(target)}")
    timeout = getattr(pg_options, "_timeout", None) or getattr(pg_options, "timeout", None)
    if not isinstance(timeout, timedelta):
        timeout = backend.timeout
    new_backend = backend._shrink(sorted(ranks_to_exclude), shrink_flags == SHRINK_ABORT,
                                  timeout)

    # torch's bookkeeping, as 2.10's _finalize_shrunk_group does it.
    is_default = target == default
    target_name = c10d._get_process_group_name(target)
    backend_name, store = c10d._world.pg_map[target]
    backend_config = c10d._world.pg_backend_config.get(target, "")
    remaining = [g for i, g in enumerate(dist.get_process_group_ranks(target))
                 if i not in ranks_to_exclude]
    if is_default:
        # The global ranks change, so every other group is wrong now: end them.
        for pg in [pg for pg in list(c10d._world.pg_group_ranks) if pg != target]:
            c10d._abort_process_group(pg)
    c10d.destroy_process_group(target)

    name = c10d._process_group_name(remaining, use_hashed_name=True)
    new_pg = dist.ProcessGroup(dist.PrefixStore(f"{name}/", store), new_backend.rank(),
                               new_backend.size())
    backend_type = dist.ProcessGroup.BackendType.CUSTOM  # as init_process_group("ringx") makes it
    new_pg._register_backend(torch.device("cpu"), backend_type, new_backend)
    new_pg._set_default_backend(backend_type)
    new_pg._set_group_name(name)
    new_pg._set_group_desc("default:shrunken" if is_default else f"{target_name}:shrunk")
    if is_default:
        c10d._update_default_pg(new_pg)
    c10d._world.pg_map[new_pg] = (backend_name, store)
    c10d._world.pg_names[new_pg] = name
    c10d._world.pg_backend_config[new_pg] = backend_config
    c10d._register_process_group(name, new_pg)
    c10d._world.pg_group_ranks[new_pg] = {g: i for i, g in enumerate(remaining)}
    c10d._world.tags_to_pg.setdefault(f"ptd:{name}", []).append(new_pg)
    c10d._world.pg_to_tag[new_pg] = f"ptd:{name}"
    return new_pg
