"""ringx's PEP 517 build backend: scikit-build-core's, building against the user's own torch.

A C++ extension must be compiled against the torch it will be imported with. With build
isolation, pip builds in a fresh environment holding only the build requirements: a plain
"torch" requirement there would fetch the newest release, whatever the user runs. So the
requirement names the torch of the environment being installed into, exactly (pip runs this
hook with that environment's interpreter; the isolation hides its site-packages from sys.path,
but sysconfig still names them). Where that environment has no torch yet, any supported
release will do, and ringx's import check (ringx/_torch_check.py) refuses a mismatch.

`pip install --no-build-isolation .` skips all this and builds against the installed torch.
"""

import importlib.metadata
import sysconfig

from scikit_build_core import build as _scikit_build
from scikit_build_core.build import *  # noqa: F401,F403  (build_wheel, build_sdist, ...)

SUPPORTED_TORCH = "torch>=2.9,<2.16"  # pyproject.toml's dependency, the same range


def installed_torch_requirement():
    """`torch==<the target environment's torch>`, or the supported range if it has none."""
    paths = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    for dist in importlib.metadata.distributions(path=paths):
        if (dist.metadata["Name"] or "").lower() == "torch":
            return f"torch=={dist.version}"
    return SUPPORTED_TORCH


def get_requires_for_build_wheel(config_settings=None):
    return _scikit_build.get_requires_for_build_wheel(config_settings) + [
        installed_torch_requirement()]


def get_requires_for_build_editable(config_settings=None):
    return _scikit_build.get_requires_for_build_editable(config_settings) + [
        installed_torch_requirement()]
