"""NCCL, loaded at run time: ringx.nccl() and the "nccl" entry of ringx.features().

ringx uses NCCL as the wire between hosts for CUDA tensors when RINGX_GPU_WIRE=nccl, and loads
libnccl.so.2 only then (or when ringx.nccl() asks), never at import: a CPU job needs none. The
library comes from RINGX_NCCL_LIBRARY if set (that path only), else the nvidia-nccl-cu12/cu13
wheel beside torch (the NCCL torch's own CUDA build uses), else the system's libnccl.so.2
(backend/transport/nccl/loader.h). It loads once per process; later calls report that load.
"""

import importlib.util
import os

import torch

from . import _C

WIRE_ENV = "RINGX_GPU_WIRE"
_LIBRARY = ("lib", "libnccl.so.2")


def candidates():
    """The nvidia-nccl wheels' libnccl.so.2 to try, in order: the one beside torch (always
    listed, so a failed load shows where the wheel was looked for), then any other nvidia.nccl
    package on sys.path that has one. Found by path: torch.cuda is not imported (importing it
    sets up CUDA, which a diagnostic must not do)."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    out = [os.path.join(site, "nvidia", "nccl", *_LIBRARY)]
    try:
        spec = importlib.util.find_spec("nvidia.nccl")  # imports the "nvidia" namespace only
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, *_LIBRARY)
        if os.path.exists(path) and all(not os.path.exists(p) or not os.path.samefile(p, path)
                                        for p in out):
            out.append(path)
    return out


def _public(report):
    return {key: report[key] for key in ("loaded", "version", "path", "tried", "error")}


def nccl():
    """Loads NCCL if it is not loaded yet (once per process) and says what was found:
    {"loaded": bool, "version": "2.27.7" or None, "path": the library's real path or None,
    "tried": ["PATH (SOURCE): what happened", ...] in order, "error": the message, with what
    to do, or None}. It never raises: a missing or unusable NCCL is reported in "error"."""
    return _public(_C.nccl.load(candidates()))


def feature():
    """ringx.features()["nccl"]: what loaded, or why not. It loads NCCL only where the job asked
    for the NCCL wire (RINGX_GPU_WIRE=nccl) and no load has been tried yet; otherwise it reports
    without loading."""
    report = _C.nccl.report()
    if not report["attempted"] and os.environ.get(WIRE_ENV) == "nccl":
        report = _C.nccl.load(candidates())
    if report["loaded"]:
        return {"on": True, "detail": f"NCCL {report['version']} loaded from {report['path']}"}
    if report["attempted"]:  # the error on one line: each place tried, then what to do
        fix = [line for line in report["error"].splitlines() if line.startswith("To fix: ")]
        return {"on": False, "detail": "could not load NCCL: " + "; ".join(report["tried"]) +
                                       "".join(". " + line for line in fix)}
    return {"on": False, "detail": f"not loaded: {WIRE_ENV}=nccl loads it when used, "
                                   "ringx.nccl() loads it now"}
