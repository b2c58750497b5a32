"""Tracing: every collective (and, from the engines, every DDP bucket and FSDP unit) as
an event on each rank's timeline, recorded to files and/or served live.

Turn it on for a whole job from the environment, before init_process_group:

    RINGX_TRACE_DIR=DIR         every rank writes DIR/rank-N.ringx, rank 0 DIR/manifest.json
    RINGX_TRACE_LISTEN=H:P      live server: rank 0 on port P lists every rank's address
    RINGX_TRACE_TOKEN=SECRET    required when H is not a loopback address

or from code, on every rank, once the default ringx group exists:

    ringx.trace.start("traces/run1")
    ...
    ringx.trace.stop()

Add your own events:

    with ringx.trace.span("forward", batch=i):
        loss = model(x)
    ringx.trace.counter("activations_bytes", n, category="memory")
    ringx.trace.mark_step(i)

Then `build/bin/ringx-trace summary DIR`, `ringx-trace export DIR -o out.json` (Perfetto),
or `ringx-viewer DIR`. Recording costs a few stores per event on the recording thread;
a background thread writes. Times are each rank's steady clock; every rank measures its
offset to rank 0 so readers can align them.
"""

import atexit
import functools
import os

import torch.distributed as dist

from . import _C

_t = _C.trace

__all__ = ["start", "stop", "enabled", "span", "instant", "counter", "mark_step", "now",
           "flush", "live_address"]

CATEGORIES = ("collective", "ddp", "fsdp", "memory", "step", "user")


def enabled():
    """Whether this process is recording."""
    return _t.enabled()


def now():
    """Nanoseconds of the trace clock (this rank's steady clock)."""
    return _t.now()


def start(dir=None, listen=None, token=None, group=None, rss_interval_ms=10,
          clock_sync_interval_ms=10000):
    """Start recording on this rank. Call it on every rank of `group` (default: the
    default group): ranks exchange their hosts, live addresses and clock connections.

    dir: directory for rank-N.ringx files and manifest.json (created if missing).
    listen: "HOST:PORT" for the live server (see module docs); token: its secret.
    """
    if not dir and not listen:
        raise ValueError("ringx.trace.start needs dir=... (files) and/or listen='HOST:PORT' "
                         "(live server)")
    token = token if token is not None else os.environ.get("RINGX_TRACE_TOKEN", "")
    from . import _ringx_group  # late: __init__ imports this module
    pg = _ringx_group(group) if dist.is_initialized() else None
    if pg is not None:
        pg._start_tracing(dir or "", listen or "", token, rss_interval_ms,
                          clock_sync_interval_ms)
        return
    if listen:
        raise ValueError("ringx.trace.start(listen=...) needs a ringx process group "
                         "(init_process_group(backend='ringx')) to publish every rank's address")
    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))
    size = dist.get_world_size() if dist.is_initialized() else int(os.environ.get("WORLD_SIZE", "1"))
    os.makedirs(dir, exist_ok=True)
    _t.start_local(dir, rank, size, rss_interval_ms)


def stop():
    """Write out everything recorded and close trace files and the live server."""
    _t.stop()


def flush():
    """Block until everything recorded so far has reached the files and live clients."""
    _t.flush()


def live_address():
    """This rank's live server address ("" without one)."""
    return _t.live_address()


def _check_category(category):
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; use one of {', '.join(CATEGORIES)}")


class span:
    """A span from entering to leaving the block (or the decorated function):

        with ringx.trace.span("forward", batch=i): ...

        @ringx.trace.span("data_loading")
        def load(): ...

    Keyword arguments become the event's arguments (int, float, str; others as str).
    `track` is the lane it is drawn in (default "user"), `category` its kind.
    """

    def __init__(self, name, track="user", category="user", **args):
        _check_category(category)
        self.name, self.track, self.category, self.args = str(name), str(track), category, args
        self._begin = []

    def __enter__(self):
        self._begin.append(_t.now())
        return self

    def __exit__(self, *exc):
        begin = self._begin.pop()
        _t.span(self.name, self.track, self.category, begin, _t.now(), self.args)
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*a, **kw):
            with self:
                return function(*a, **kw)
        return wrapped


def instant(name, track="user", category="user", **args):
    """A point in time on `track`."""
    _check_category(category)
    _t.instant(str(name), str(track), category, args)


def counter(name, value, category="user", track=None):
    """A sample of a counter (drawn as a chart); category "memory" for byte counts."""
    _check_category(category)
    if track is None:
        track = "memory" if category == "memory" else "user"
    _t.counter(str(name), float(value), category, str(track))


def mark_step(step):
    """Marks the start of training step `step` on the "steps" track."""
    _t.mark_step(int(step))


# Python exits before C++'s own exit handlers run: write everything out while the
# interpreter is still whole.
atexit.register(stop)
