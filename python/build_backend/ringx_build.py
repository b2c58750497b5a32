"""ringx's PEP 517 build backend: scikit-build-core's, building against the user's own torch.

A C++ extension must be compiled against the torch it will be imported with. With build
isolation, pip builds in a fresh environment holding only the build requirements: a plain
"torch" requirement there would fetch the newest release, whatever the user runs. So the
requirement names the torch of the environment being installed into, exactly (pip runs this
hook with that environment's interpreter; the isolation hides its site-packages from sys.path,
but sysconfig still names them). Where that environment has no torch yet, any supported
release will do, and ringx's import check (ringx/_torch_check.py) refuses a mismatch.

`pip install --no-build-isolation .` (the README's way) skips all this and builds against the
installed torch, but pip then installs none of the build requirements either. So before
anything is built, `preflight()` looks for what the build needs (scikit-build-core, torch,
CMake, a build tool, a C++ compiler, Python's headers) and, where something is missing, ends
the build with one line naming each missing piece and the command that brings it, instead of
a traceback from inside pip's hook (or a page of CMake output) that says neither.
"""

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig

try:
    from scikit_build_core import build as _scikit_build
except ImportError:  # reported by preflight(), the first thing every build hook does
    _scikit_build = None

SUPPORTED_TORCH = "torch>=2.9,<2.16"  # pyproject.toml's dependency, the same range
_SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _source_text(name):
    with open(os.path.join(_SOURCE, name)) as f:
        return f.read()


def build_requirement():
    """scikit-build-core's requirement as pyproject.toml's [build-system] names it."""
    requires = re.search(r"^requires\s*=\s*\[([^\]]*)\]", _source_text("pyproject.toml"), re.M)
    for requirement in re.findall(r"[\"']([^\"']+)[\"']", requires.group(1) if requires else ""):
        if requirement.startswith("scikit-build-core"):
            return requirement
    return "scikit-build-core"


def _release(text):
    """The leading numbers of a version ('3.25.1', '0.10.7', '1.1.2rc1') as a tuple."""
    return tuple(int(p) for p in re.findall(r"\d+", re.match(r"[\d.]*", text).group(0)))


def cmake_minimum():
    """The CMake version CMakeLists.txt asks for (cmake_minimum_required), as a tuple."""
    found = re.search(r"cmake_minimum_required\s*\(\s*VERSION\s+([0-9.]+)",
                      _source_text("CMakeLists.txt"))
    return _release(found.group(1)) if found else (3, 18)


def installed_torch_requirement():
    """`torch==<the target environment's torch>`, or the supported range if it has none."""
    paths = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    for dist in importlib.metadata.distributions(path=paths):
        if (dist.metadata["Name"] or "").lower() == "torch":
            return f"torch=={dist.version}"
    return SUPPORTED_TORCH


def _importable(module):
    """Whether `module` can be imported here, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _version(program):
    """`program --version`'s first x.y[.z], as a tuple, or None when it does not run."""
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\d+\.\d+[\d.]*", out.stdout)
    return _release(found.group(0)) if found else None


def _cmake_candidates():
    """Where scikit-build-core looks for CMake: $CMAKE_EXECUTABLE alone when set, else the
    `cmake` package from PyPI, then cmake3 and cmake on PATH."""
    if os.environ.get("CMAKE_EXECUTABLE"):
        return [os.environ["CMAKE_EXECUTABLE"]]
    candidates = []
    if _importable("cmake"):
        try:
            import cmake  # the PyPI package: its CMAKE_BIN_DIR holds the program
            candidates.append(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))
        except (ImportError, AttributeError):
            pass
    return candidates + [p for p in (shutil.which("cmake3"), shutil.which("cmake")) if p]


def _compiler():
    """The C++ compiler CMake will be handed: $CXX, else Python's own (sysconfig), which
    scikit-build-core passes on; else CMake's search of PATH. Returns (name, path or None)."""
    name = os.environ.get("CXX") or (sysconfig.get_config_var("CXX") or "").split(" ")[0]
    if name:
        return name, shutil.which(name)
    for name in ("c++", "g++", "clang++"):
        if shutil.which(name):
            return name, shutil.which(name)
    return "c++", None


def missing_pieces(compiling=True):
    """What this environment lacks for building ringx (for packing an sdist, compiling=False:
    only scikit-build-core): one 'what (how to get it)' each."""
    missing = []
    requirement = build_requirement()
    oldest = re.search(r">=\s*([0-9.]+)", requirement)
    if _scikit_build is None:
        missing.append(f"{requirement} (pip install '{requirement}')")
    elif oldest and _release(importlib.metadata.version("scikit-build-core")) < _release(
            oldest.group(1)):
        missing.append(f"{requirement}; found {importlib.metadata.version('scikit-build-core')} "
                       f"(pip install --upgrade '{requirement}')")
    if not compiling:
        return missing
    if not _importable("torch"):
        missing.append(f"torch, which ringx is built against (pip install '{SUPPORTED_TORCH}')")
    need = cmake_minimum()
    versions = [v for v in map(_version, _cmake_candidates()) if v]
    if not any(v >= need for v in versions):
        have = f"; found only {'.'.join(map(str, max(versions)))}" if versions else ""
        if os.environ.get("CMAKE_EXECUTABLE"):
            have += f"; CMAKE_EXECUTABLE={os.environ['CMAKE_EXECUTABLE']}"
        missing.append(f"CMake {'.'.join(map(str, need))} or newer{have} "
                       "(pip install cmake, or apt install cmake)")
    if not any(shutil.which(tool) for tool in ("ninja", "gmake", "make")):
        missing.append("ninja or make (pip install ninja, or apt install make)")
    name, path = _compiler()
    if path is None:
        missing.append(f"a C++20 compiler: '{name}' is not on PATH "
                       "(apt install g++, or set CXX to one)")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"Python's C headers: no Python.h in {include} "
                       f"(apt install python{sys.version_info.major}.{sys.version_info.minor}-dev)")
    return missing


def parallel_level():
    """Compile jobs: one per core, but no more than 2 GiB of available memory each (a file that
    includes torch/extension.h takes about 1.5 GiB). pip's build would otherwise run make's one
    job, or ninja's cores + 2 whatever the memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            available_kib = int(re.search(r"^MemAvailable:\s+(\d+)", f.read(), re.M).group(1))
        return max(1, min(cores or 1, available_kib // (2 << 20)))
    except (OSError, AttributeError):
        return cores or 1


def preflight(compiling=True):
    """Ends the build with one line when something it needs is missing; returns
    scikit-build-core's backend otherwise."""
    missing = missing_pieces(compiling)
    if missing:
        raise SystemExit(f"ringx: cannot build here, this environment ({sys.prefix}) lacks: "
                         + "; ".join(missing) + ". Install that, then run the same command again.")
    if compiling:  # read by `cmake --build`, which scikit-build-core runs
        os.environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(parallel_level()))
    return _scikit_build


# ---- the PEP 517 / 660 hooks ----------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    base = (_scikit_build.get_requires_for_build_wheel(config_settings) if _scikit_build
            else [build_requirement()])
    return base + [installed_torch_requirement()]


def get_requires_for_build_editable(config_settings=None):
    base = (_scikit_build.get_requires_for_build_editable(config_settings) if _scikit_build
            else [build_requirement()])
    return base + [installed_torch_requirement()]


def get_requires_for_build_sdist(config_settings=None):
    return (_scikit_build.get_requires_for_build_sdist(config_settings) if _scikit_build
            else [build_requirement()])


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return preflight().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return preflight().prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return preflight().build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return preflight().build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    return preflight(compiling=False).build_sdist(sdist_directory, config_settings)
