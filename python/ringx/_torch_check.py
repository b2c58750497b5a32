"""The torch this ringx was built against, checked before its C++ extension loads.

A C++ extension works only with the torch it was compiled against: loaded into another release
it fails with an undefined symbol, or loads and crashes later. So ringx refuses a torch other
than its own (version and C++ ABI, as recorded in _build_info.py by the build) with an
ImportError that names both and says how to rebuild.
"""

import os


def mismatch(message):
    """The ImportError of a torch this ringx was not built for (marked, for ringx_autoload.py)."""
    error = ImportError(message)
    error.ringx_torch_mismatch = True
    return error


def check(torch):
    """Raises ImportError unless `torch` (the module) is the torch this ringx was built for."""
    try:
        from . import _build_info as built
    except ImportError:
        raise mismatch(
            "ringx: this build has no record of the torch it was built against "
            "(ringx/_build_info.py is missing: a build older than the check, or a partial "
            f"install); rebuild it: {_rebuild_command(None)}") from None
    running_abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    # As plain text: torch.__version__ (a TorchVersion) compares by parsing both sides, which
    # cost a third of a millisecond of every rank's start.
    if str(torch.__version__) == built.torch_version and running_abi == built.torch_cxx11_abi:
        return
    where = os.path.dirname(torch.__file__)
    if torch.__version__ == built.torch_version:
        what = (f"the same torch {torch.__version__} built with the other C++ ABI "
                f"(_GLIBCXX_USE_CXX11_ABI={int(running_abi)}, ringx has "
                f"{int(built.torch_cxx11_abi)})")
    else:
        what = f"torch {torch.__version__}"
    raise mismatch(
        f"ringx was built against torch {built.torch_version}, but this Python runs {what} "
        f"(from {where}). A C++ extension works only with the torch it was compiled "
        f"against. Rebuild ringx for this torch: {_rebuild_command(built.source_dir)} "
        f"(ringx supports torch {built.supported}).")


def _rebuild_command(source_dir):
    source = source_dir if source_dir and os.path.isdir(source_dir) else "<ringx source>"
    return (f"pip install --no-build-isolation --force-reinstall --no-deps {source} "
            "(or `make` in a checkout)")
