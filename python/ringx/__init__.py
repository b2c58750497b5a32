"""ringx: a c10d backend for torch.distributed with its own ring collectives.

    import ringx                      # registers backend "ringx"
    import torch.distributed as dist
    dist.init_process_group(backend="ringx", init_method=..., rank=..., world_size=...)

Everything torch.distributed offers on CPU tensors (all_reduce, broadcast, all_gather,
reduce_scatter, all_to_all, send/recv, barrier, ...) then runs on ringx. Extras:

    ringx.broadcast_coalesced(tensors, src, group=None, bucket_bytes=...)
    ringx.transports(group=None)      # "shm" / "tcp" / "self" to each rank
    ringx.transports(group, device="cuda")  # "cuda-ipc" (device ring) or "staged:shm" ...
    ringx.cuda_ring(group=None)       # the group's device ring for CUDA tensors, or why none
    ringx.traffic(group=None)         # bytes sent/received over each connection
    ringx.calls(group=None)           # collectives run on the caller's thread / in place / comm thread
    ringx.features()                  # torch built against, CUDA, torch-release-dependent parts
    ringx.nccl()                      # loads NCCL (the CUDA wire between hosts), says what it found
    ringx.dump_flight_recorder(path=None)  # this rank's last collectives, for `ringx-trace why`
    ringx.trace                       # events, trace files, live server (ringx/trace.py)
    ringx.ddp.DistributedDataParallel # the C++ DDP engine with per-bucket timing (ringx/ddp.py)
    ringx.fsdp.FullyShardedDataParallel  # the C++ FSDP engine (ringx/fsdp.py)
"""

import atexit
import os

import torch
import torch.distributed as dist

from . import _torch_check

_torch_check.check(torch)  # an ImportError naming both versions, before _C can fail to load

from . import _C  # noqa: E402
from ._C import ProcessGroupRingx

__all__ = ["ProcessGroupRingx", "broadcast_coalesced", "calls", "cuda_ring", "dump_flight_recorder",
           "features", "nccl", "shrink_group", "transports", "traffic", "BACKEND_NAME",
           "DEFAULT_BUCKET_BYTES"]

BACKEND_NAME = "ringx"
# PyTorch's DDP syncs module state in 250 MiB buckets; smaller buckets pipeline better.
DEFAULT_BUCKET_BYTES = 16 * 1024 * 1024


def _group_name():
    """The name traces give the group being created: "world" for the default group,
    torch's own group number ("1", "2", ...) for the others, the same on every rank."""
    if not dist.is_initialized():
        return "world"
    count = getattr(dist.distributed_c10d, "_group_count", None)
    return str(count - 1) if isinstance(count, int) and count > 0 else "group"


def _create_process_group(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout, _group_name())


def _create_process_group_extended(opts, pg_options):
    # torch >= 2.14: init_process_group(enable_reconfigure=True) makes a group that connects
    # to no one until dist._reconfigure.
    return _C.create_process_group(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                                   _group_name(), connect=not opts.enable_reconfigure)


def _register():
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    # A Backend for the CPU device, and CUDA where this build has it.
    devices = ["cpu", "cuda"] if _C.cuda_built() else ["cpu"]
    options = getattr(torch._C._distributed_c10d, "_DistributedBackendOptions", None)
    if hasattr(options, "enable_reconfigure"):
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group_extended,
                                      extended_api=True, devices=devices)
    else:
        dist.Backend.register_backend(BACKEND_NAME, _create_process_group, devices=devices)


_register()

# At exit, let every communication thread finish releasing the tensors of work issued so
# far while the interpreter still runs: a group kept alive past destroy_process_group (by a
# DDP or FSDP engine, say) would otherwise drop Python-owned tensors after finalisation,
# which kills the process. Bounded, so a collective stuck on a dead peer cannot hang exit.
atexit.register(_C.drain_communication_threads, 10.0)

from ._elastic import shrink_group  # noqa: E402
from . import _timeout  # noqa: E402

_timeout.install()  # torch's _set_pg_timeout reaches ringx groups (torch < 2.14)
from . import trace  # noqa: E402  (needs _C loaded; registers the trace's exit handler)
from . import _watch  # noqa: E402  (torch's own DDP, watched while tracing records)
from . import _nccl  # noqa: E402  (loads nothing: ringx.nccl() and RINGX_GPU_WIRE=nccl do)
from ._nccl import nccl  # noqa: E402

_watch.install()

# The engines and the analysis helpers load on first use (ringx.ddp, ringx.fsdp,
# ringx.analysis, ringx.wire), not at `import ringx`: every rank of a job imports ringx before
# it can join the group, and a rank that only runs collectives would pay for them (ringx.ddp
# imports torch's comm hooks) on every process start, 32 of them at once on a small machine.
_LAZY_SUBMODULES = ("analysis", "ddp", "fsdp", "wire")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)  # sets the attribute too
    raise AttributeError(f"module 'ringx' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))


def _ringx_group(group):
    """The ProcessGroupRingx behind `group` (None = the default group), or None."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupRingx):
        return pg
    get_backend = getattr(pg, "_get_backend", None)  # torch 2.x wraps backends
    if get_backend is not None:
        try:
            backend = get_backend(torch.device("cpu"))
        except RuntimeError:
            return None
        if isinstance(backend, ProcessGroupRingx):
            return backend
    return None


def _require_ringx_group(group, function):
    """_ringx_group(group), or a ValueError naming `function` when the group is not ringx."""
    pg = _ringx_group(group)
    if pg is None:
        raise ValueError(f"ringx.{function} needs a ringx process group; this group's CPU "
                         "backend is not ringx")
    return pg


def features():
    """What this build of ringx can do, {name: {"on": bool, "detail": str}}: "cuda" (collectives
    on CUDA tensors: built in, or why not), "nccl" (ringx.nccl()'s library: loaded, or why not;
    loaded here only under RINGX_GPU_WIRE=nccl), and each feature that needs a torch release newer
    than the oldest ringx supports, on or off for the torch it was built against. A feature
    that is off is absent from that torch itself (its call does not exist there)."""
    from . import _build_info
    out = {"torch": {"on": True, "detail": f"built against torch {_build_info.torch_version}"}}
    out["cuda"] = {"on": bool(_C.cuda_built()), "detail": _build_info.cuda_status}
    for feature in _C.torch_features():
        state = "on" if feature["on"] else f"off: torch {_build_info.torch_version} has none"
        out[feature["name"]] = {
            "on": bool(feature["on"]),
            "detail": f"{feature['what']} ({state}; it came in torch {feature['since']})"}
    out["nccl"] = _nccl.feature()  # loaded, why not, or "not loaded" (see ringx/_nccl.py)
    return out


def transports(group=None, device="cpu"):
    """The transport this rank uses to each rank of `group` (None = the default group), a
    ringx group: "shm" (shared memory, same host), "tcp", "self", or "none" (not connected:
    ringx connects to a peer the first time a collective or point-to-point call needs it).

    device="cuda": what collectives on CUDA tensors use to each rank: "cuda-ipc" where the
    device ring runs them (ranks of one host, GPU memory read directly over CUDA IPC; set up on
    the group's first allreduce, all-gather or reduce-scatter of CUDA tensors), else "staged:"
    and the host transport the tensors are staged over ("staged:shm", "staged:tcp"). Why a
    group has no device ring: ringx.cuda_ring(group)."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"ringx.transports: device must be 'cpu' or 'cuda', not {device!r}")
    pg = _require_ringx_group(group, "transports")
    if device == "cpu":
        return pg.transports()
    ring, _ = pg.cuda_transport()
    return ["self" if t == "self" else ring or f"staged:{t}" for t in pg.transports()]


def cuda_ring(group=None):
    """The device ring of `group` (None = the default group) for its collectives on CUDA
    tensors: {"transport": "cuda-ipc" or None, "why": why there is none ("" when there is)}."""
    ring, why = _require_ringx_group(group, "cuda_ring").cuda_transport()
    return {"transport": ring or None, "why": why}


def traffic(group=None):
    """Bytes this rank has sent and received over `group`'s connections (None = the default
    group; a ringx group), counted by ringx's transports since the group was made: one dict
    per peer and channel, {"peer": group rank, "channel": "collective" or "p2p", "transport":
    "shm", "tcp" or "none" (not connected yet), "sent": bytes, "received": bytes}. Take the difference of two calls to
    measure what a step or a collective put on the wire."""
    return _require_ringx_group(group, "traffic").traffic()


def dump_flight_recorder(path=None):
    """Writes this rank's flight recorder now and returns the file's path.

    Every ringx group keeps its last collectives (RINGX_FLIGHT_RECORDER_ENTRIES, default
    2048: seq, op, size, state issued/started/finished/failed, times), tracing on or off.
    They are written to `path` (a directory; None = RINGX_DUMP_DIR, else
    /tmp/ringx-flight-recorder-<user>) as flight-rank-<N>.json, one file per rank holding
    all its groups, replaced whole. ringx also writes it by itself when a collective fails
    or times out, when a peer gives up, and on SIGUSR1. `ringx-trace why DIR` reads the
    ranks' files and names the collective and the ranks that never arrived or are stuck."""
    return _C.trace.dump_flight_recorder("" if path is None else os.fspath(path))


def calls(group=None):
    """Where this rank's collectives on `group` (None = the default group; a ringx group) ran
    so far: {"caller_thread": n, "in_place": k, "comm_thread": m}. A synchronous call
    (async_op=False, the default) issued while the group has nothing queued runs on the
    calling thread, which saves two thread hand-offs; a call issued by a Future callback
    (a DDP comm hook's next step) runs in place, right after the collective whose completion
    ran the callback, on every rank; asynchronous calls, and calls issued behind queued ones,
    run on the group's communication thread in issue order."""
    return _require_ringx_group(group, "calls").calls()


def broadcast_coalesced(tensors, src, group=None, bucket_bytes=DEFAULT_BUCKET_BYTES):
    """Broadcast a list of tensors from rank `src` (a rank of `group`) in place.

    Tensors are packed into flat buckets of at most `bucket_bytes` (one dtype per
    bucket), each bucket is broadcast pipelined in segments along a chain of ranks, and
    at most two buckets are in flight, so packing one overlaps sending the other. On a
    group of another backend this falls back to torch's own coalesced broadcast.
    Blocks until every tensor holds src's values.
    """
    tensors = list(tensors)
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive, got {bucket_bytes}")
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError("broadcast_coalesced expects a list of tensors")
    pg = _ringx_group(group)
    if pg is not None:
        pg.broadcast_coalesced(tensors, src, bucket_bytes)
        return
    target = group if group is not None else dist.distributed_c10d._get_default_group()
    dist._broadcast_coalesced(target, tensors, bucket_bytes, src)
