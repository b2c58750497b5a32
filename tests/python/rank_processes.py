"""Rank processes for the multi-process tests (harness.run_ranks, PyTorch's conformance suite).

A rank starts from a fork server that imported torch, ringx and the test's modules once: a
fresh process, as spawn gives, without every rank importing torch again (1-2 s a rank, most
of what a small test took, and several times that on a busy machine). A forked process
inherits the fork server's environment, not its parent's, so each RankProcess carries the
environment its parent had when it was made, as a spawned one would.

    ctx = context(["torch", "ringx", "harness"])
    p = ctx.Process(target=..., args=...)   # a RankProcess
"""

import multiprocessing
import multiprocessing.context
import os


class RankProcess(multiprocessing.context.ForkServerProcess):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        super().run()


class _Context(multiprocessing.context.ForkServerContext):
    Process = RankProcess


_context = None


def context(preload, paths=()):
    """The fork-server context whose Process is RankProcess. The server imports `preload`
    (module names, found in `paths` too) when it starts; one server serves the whole test
    process, so the first caller's lists are the ones used."""
    global _context
    if _context is None:
        # Python 3.11's fork server ignores the sys.path it is handed, and a module it cannot
        # import it skips in silence: give it the directories through PYTHONPATH.
        entries = [os.path.abspath(p) for p in paths]
        entries += [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
        _context = _Context()
        _context.set_forkserver_preload(list(preload))
    return _context
