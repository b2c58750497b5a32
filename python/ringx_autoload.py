"""torch's entry point for out-of-tree backends (pyproject.toml, group "torch.backends"):
`import torch` calls register(), so that backend="ringx" works without `import ringx`.

It lives apart from ringx/__init__.py because `import ringx` imports torch, and torch then
loads this entry point while ringx is still half imported: then there is nothing to do, as
ringx registers the backend itself once torch is ready. And outside the ringx package, since
loading an entry point of the package would run ringx/__init__.py before register().

A ringx built for another torch (an upgraded torch, a stale install) must not break
`import torch` itself (torch turns an entry point's exception into its own import failing):
it warns instead, and backend="ringx" then fails with the same message, naming both versions.
"""

import importlib
import warnings


def register():
    try:
        importlib.import_module("ringx")  # registers "ringx"; a no-op while ringx is importing
    except ImportError as error:
        if not getattr(error, "ringx_torch_mismatch", False):
            raise
        message = str(error)
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        import torch.distributed as dist

        def refuse(*args, **kwargs):
            raise RuntimeError(message)

        dist.Backend.register_backend("ringx", refuse, devices=["cpu"])
