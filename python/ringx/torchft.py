"""torchft over ringx: a process group that torchft's Manager reconfigures on every quorum.

    from ringx.torchft import ProcessGroupRingx
    manager = torchft.Manager(pg=ProcessGroupRingx(), ...)

torchft (PyPI `torchft`) keeps training across failures: its Lighthouse forms a quorum of the
live replicas and the Manager calls `configure(store_addr, replica_id, rank, world_size, ...)`
on each quorum change, with a fresh store prefix each time, then `errored()` before it commits
a step and `abort()` when a collective failed. Gloo cannot abort cleanly, so torchft runs it in
a child process (ProcessGroupBabyGloo); ringx aborts natively (every issued Work fails at once,
docs/faults.md), so the group runs in the training process itself and a reconfigure is a new
ringx group on the quorum's store.

A failed collective does not raise from `wait()`: torchft's DDP comm hook and its work
wrappers (0.2.0) expect the step to go on and the failure to show in `errored()`, which
discards the step (see ../shared/notes: torchft). `wait()` returns, the future holds the
tensor, and `errored()` returns the group's first failure."""

from datetime import timedelta
from typing import Optional

import torch
from torch.distributed import ProcessGroup as BaseProcessGroup

try:
    from torchft.process_group import ProcessGroupWrapper
except ImportError as e:  # pragma: no cover - said at import, with what to do
    raise ImportError("ringx.torchft needs torchft: pip install torchft") from e

from . import _C


class _FailureRecordingWork(torch.distributed.Work):
    """A ringx Work whose failure goes to the group's errored() instead of out of wait()."""

    def __init__(self, work, tensors, group):
        super().__init__()
        self._work = work
        self._tensors = tensors
        self._group = group
        self._future = torch.futures.Future()

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        try:
            self._work.wait() if timeout is None else self._work.wait(timeout)
        except Exception as e:  # noqa: BLE001  kept for errored(), not raised
            self._group._record(e)
        if not self._future.done():
            self._future.set_result(self._tensors)
        return True

    def get_future(self) -> torch.futures.Future:
        self.wait()
        return self._future


class ProcessGroupRingx(ProcessGroupWrapper):
    """torchft's reconfigurable process group over ringx (CPU tensors)."""

    def __init__(self, timeout: timedelta = timedelta(seconds=60)) -> None:
        super().__init__(timeout=timeout)
        self._errored: Optional[Exception] = None
        self._backend = None

    def _create_pg(self, store, rank: int, world_size: int) -> BaseProcessGroup:
        self._errored = None
        pg = BaseProcessGroup(store, rank, world_size)
        backend = _C.create_process_group(store, rank, world_size, self._timeout,
                                          f"torchft_q{self._quorum_id}")
        pg._register_backend(torch.device("cpu"), BaseProcessGroup.BackendType.CUSTOM, backend)
        pg._set_default_backend(BaseProcessGroup.BackendType.CUSTOM)
        self._backend = backend
        return pg

    def _record(self, error: Exception) -> None:
        if self._errored is None:
            self._errored = error

    def allreduce(self, tensors, opts):
        return _FailureRecordingWork(super().allreduce(tensors, opts), tensors, self)

    def errored(self) -> Optional[Exception]:
        if self._errored is None and self._backend is not None and self._backend.error:
            self._errored = RuntimeError(self._backend.error)
        return self._errored

    def abort(self, errored: bool = True) -> None:
        if errored:
            self._record(RuntimeError("ringx: the process group was aborted (torchft)"))
        backend, self._backend = self._backend, None
        if backend is not None:
            backend.abort()  # every issued Work fails at once: nothing waits on a dead peer
        super().abort(errored=errored)

    def getBackendName(self) -> str:
        return "torchft-ringx"
