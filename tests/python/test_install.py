"""The README's install: what `pip install --no-build-isolation .` says when the environment
lacks something the build needs (one line naming each piece and the command that brings it,
never a traceback), and that the install commands the README and docs/install.md print are
the same. make pip-check runs the README's install for real in a fresh environment; these are
the checks that need no build."""

import os
import subprocess
import sys
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKEND = os.path.join(REPO, "python", "build_backend")

# Calls one of the backend's hooks, with the modules named in HIDE unimportable (as in an
# environment that lacks them), and prints what the build would end with.
HOOK = """
import importlib.abc, os, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in os.environ.get("HIDE", "").split(","):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Hide())
sys.path.insert(0, sys.argv[1])
import ringx_build
try:
    print("returned", getattr(ringx_build, sys.argv[2])(*sys.argv[3:]))
except SystemExit as stop:
    print("stopped", stop.code)
"""


def _hook(tmp_path, hook, *args, hide=(), **env):
    result = subprocess.run([sys.executable, "-c", HOOK, BACKEND, hook, *args],
                            env=dict(os.environ, HIDE=",".join(hide), **env), cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout.strip()


def test_without_scikit_build_core_the_build_stops_with_one_line_naming_it(tmp_path):
    out = _hook(tmp_path, "prepare_metadata_for_build_wheel", str(tmp_path),
                hide=["scikit_build_core"])
    assert out.startswith("stopped ringx: cannot build here, this environment"), out
    assert "lacks: scikit-build-core>=0.10 (pip install 'scikit-build-core>=0.10')" in out, out
    assert out.endswith("Install that, then run the same command again.") and "\n" not in out
    # Everything else is here: only the missing piece is named.
    assert "CMake" not in out and "compiler" not in out and "torch," not in out, out


def test_every_missing_piece_is_named_with_how_to_get_it(tmp_path):
    out = _hook(tmp_path, "build_wheel", str(tmp_path), hide=["torch"],
                CMAKE_EXECUTABLE="/nonexistent/cmake", CXX="/nonexistent/g++")
    assert "torch, which ringx is built against (pip install 'torch>=2.9,<2.16')" in out, out
    assert "CMake 3.18 or newer; CMAKE_EXECUTABLE=/nonexistent/cmake (pip install cmake, or " \
        "apt install cmake)" in out, out
    assert "a C++20 compiler: '/nonexistent/g++' is not on PATH (apt install g++, or set CXX " \
        "to one)" in out, out
    assert "scikit-build-core" not in out and "\n" not in out, out


def test_frontends_that_ask_get_the_requirements_without_scikit_build_core(tmp_path):
    # `python -m build --no-isolation` asks the backend for its requirements and names the
    # missing ones itself: that question must be answered, not end in an ImportError.
    out = _hook(tmp_path, "get_requires_for_build_wheel", hide=["scikit_build_core"])
    assert out.startswith("returned ['scikit-build-core>=0.10', 'torch=="), out


def test_this_environment_has_everything_the_build_needs():
    sys.path.insert(0, BACKEND)
    try:
        import ringx_build
    finally:
        sys.path.pop(0)
    assert ringx_build.missing_pieces() == []
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        requires = tomllib.load(f)["build-system"]["requires"]
    assert ringx_build.build_requirement() in requires
    assert ringx_build.parallel_level() >= 1


def test_the_readme_and_docs_install_md_print_the_same_install_commands():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import readme_install
    finally:
        sys.path.pop(0)
    commands = readme_install.readme_commands()  # stops when the two disagree
    assert readme_install.pip_lines(commands) == [
        "pip install torch", 'pip install "scikit-build-core>=0.10"',
        "pip install --no-build-isolation ."], commands
