"""torch's entry point for out-of-tree backends (pyproject.toml, group "torch.backends"):
`import torch` calls register(), so that backend="ringx" works without `import ringx`.

It lives apart from ringx/__init__.py because `import ringx` imports torch, and torch then
loads this entry point while ringx is still half imported: then there is nothing to do, as
ringx registers the backend itself once torch is ready.
"""

import importlib


def register():
    importlib.import_module("ringx")  # registers "ringx"; a no-op while ringx is importing
