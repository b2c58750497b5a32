"""ringx and the torch release it runs with: a build refuses any torch but its own with an
ImportError naming both (never an undefined symbol or a crash), and an isolated pip build asks
for the torch of the environment it installs into. make torch-matrix builds and tests ringx on
every release from 2.9 to 2.15; these are the checks that need only this one."""

import importlib.metadata
import os
import shutil
import subprocess
import sys

import ringx
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _copy_with_build_info(tmp_path, **changes):
    """A copy of this ringx in tmp_path whose _build_info.py claims other facts."""
    package = tmp_path / "ringx"
    shutil.copytree(os.path.dirname(ringx.__file__), package)
    info = package / "_build_info.py"
    text = info.read_text()
    for name, value in changes.items():
        lines = [line for line in text.splitlines() if not line.startswith(f"{name} =")]
        text = "\n".join(lines + [f"{name} = {value!r}"]) + "\n"
    info.write_text(text)


def _run(tmp_path, code, autoload=False):
    env = dict(os.environ, PYTHONPATH=str(tmp_path),
               TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120)


def _import_with_build_info(tmp_path, **changes):
    """Imports a copy of this ringx whose _build_info.py claims other facts; returns stderr."""
    _copy_with_build_info(tmp_path, **changes)
    result = _run(tmp_path, "import ringx")
    assert result.returncode != 0, "ringx imported with a torch it was not built for"
    return result.stderr


def test_another_torch_release_is_an_import_error_naming_both(tmp_path):
    stderr = _import_with_build_info(tmp_path, torch_version="2.12.0+cpu")
    assert "ImportError: ringx was built against torch 2.12.0+cpu, but this Python runs torch " \
           f"{torch.__version__}" in stderr, stderr
    assert "pip install --no-build-isolation --force-reinstall --no-deps" in stderr
    assert "undefined symbol" not in stderr


def test_an_installed_ringx_for_another_torch_leaves_import_torch_working(tmp_path):
    # pip installs ringx with a torch.backends entry point, which `import torch` runs: a ringx
    # built for another torch (torch upgraded since) must not make `import torch` fail.
    _copy_with_build_info(tmp_path, torch_version="2.12.0+cpu")
    dist_info = tmp_path / "ringx-0.2.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: ringx\nVersion: 0.2.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[torch.backends]\nringx = ringx_autoload:register\n")
    shutil.copy(os.path.join(os.path.dirname(ringx.__file__), "..", "ringx_autoload.py"), tmp_path)
    result = _run(tmp_path, (
        "import torch, torch.distributed as dist\n"
        "print('torch imported')\n"
        "dist.init_process_group('ringx', init_method='tcp://127.0.0.1:0', rank=0, world_size=1)\n"),
        autoload=True)
    assert "torch imported" in result.stdout, result.stderr
    assert "RuntimeWarning: ringx was built against torch 2.12.0+cpu" in result.stderr
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith(
        "RuntimeError: ringx was built against torch 2.12.0+cpu, but this Python runs torch"), \
        result.stderr


def test_the_other_cxx_abi_is_an_import_error_too(tmp_path):
    other = not bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    stderr = _import_with_build_info(tmp_path, torch_cxx11_abi=other)
    assert "built with the other C++ ABI" in stderr, stderr


def test_a_build_without_its_record_is_refused(tmp_path):
    _copy_with_build_info(tmp_path)
    (tmp_path / "ringx" / "_build_info.py").unlink()
    result = _run(tmp_path, "import ringx")
    assert "has no record of the torch it was built against" in result.stderr, result.stderr


def test_the_running_torch_is_the_one_recorded():
    from ringx import _build_info
    assert _build_info.torch_version == torch.__version__
    assert _build_info.torch_cxx11_abi == bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def test_an_isolated_pip_build_asks_for_the_environments_own_torch():
    # The build backend runs in pip's isolated environment with this environment's
    # interpreter: it must name this torch exactly, not "the newest".
    sys.path.insert(0, os.path.join(REPO, "python", "build_backend"))
    try:
        import ringx_build
    finally:
        sys.path.pop(0)
    assert ringx_build.installed_torch_requirement() == \
        f"torch=={importlib.metadata.version('torch')}"


def _configure_against(tmp_path, version):
    """CMake's configure step against a stand-in torch package that says it is `version`."""
    torch_dir = tmp_path / "site" / "torch"
    (torch_dir / "include" / "torch").mkdir(parents=True)
    (torch_dir / "lib").mkdir()
    (torch_dir / "version.py").write_text(f"__version__ = '{version}'\ncuda = None\n")
    return subprocess.run(
        ["cmake", "-S", REPO, "-B", str(tmp_path / "build"), f"-DRINGX_TORCH_DIR={torch_dir}",
         f"-DPython3_EXECUTABLE={sys.executable}", "-DRINGX_BUILD_TESTS=OFF",
         "-DRINGX_BUILD_VIEWER=OFF", "-DRINGX_BUILD_SAMPLES=OFF", "-DRINGX_BUILD_CUDA=OFF"],
        capture_output=True, text=True, timeout=120)


def test_a_torch_older_than_2_9_is_refused_when_building(tmp_path):
    result = _configure_against(tmp_path, "2.8.0+cpu")
    assert result.returncode != 0
    assert "torch 2.8.0+cpu" in result.stderr and "older than 2.9, the oldest release ringx " \
        "supports" in " ".join(result.stderr.split()), result.stderr


def test_a_torch_newer_than_2_15_is_built_with_a_warning(tmp_path):
    # The stand-in has no libraries, so configure stops after the version check's warning.
    result = _configure_against(tmp_path, "2.16.0+cpu")
    stderr = " ".join(result.stderr.split())
    assert "torch 2.16.0+cpu is newer than 2.15, the newest release ringx was tested with; " \
        "building anyway" in stderr, result.stderr
    assert "has no libc10.so" in stderr
