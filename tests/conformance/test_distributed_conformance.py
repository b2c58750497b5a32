"""Run PyTorch's own distributed conformance suite against a c10d backend.

The suite is torch/testing/_internal/distributed/distributed_test.py of the torch in the
project's environment (2.13).  This file is the equivalent of upstream's
test/distributed/test_distributed_spawn.py: one TestCase that derives from
TestDistBackend and DistributedTest._DistTestBase and starts WORLD_SIZE fresh processes
per test (from a fork server that imported this module once, not spawned).

Environment (defaults are filled in here when unset):
  BACKEND      backend under test: "ringx" (default), or "gloo" for the baseline.
  WORLD_SIZE   number of ranks (default 2).
  TEMP_DIR     scratch dir with barrier/ and test_dir/ (default: a fresh temp dir;
               TestDistBackend.setUp replaces it with a fresh one per test anyway).
  INIT_METHOD  default file://$TEMP_DIR/init_dir/shared_init_file (upstream's init-file
               variant); setUp replaces it with a fresh file per test.  The default
               process group of each test is always created on a per-test FileStore
               (TestDistBackend.init_method), whatever INIT_METHOD says.

For BACKEND=ringx the package ``ringx`` must be importable: put build/python on
PYTHONPATH (it is also appended to sys.path automatically when present).  Importing
it registers the backend with torch.distributed; that import happens at module level
so every spawned rank (which re-imports this module) registers it too.

Run (run_conformance.sh does this per world size and compares with the baseline):
  BACKEND=gloo WORLD_SIZE=2 .venv/bin/python -m pytest tests/conformance/test_distributed_conformance.py -q
"""

import atexit
import importlib.util
import multiprocessing
import os
import shutil
import sys
import tempfile
import unittest

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_ROOT = os.path.dirname(os.path.dirname(_HERE))

# ---- 1. environment defaults (spawned ranks inherit the parent's values) ----------------
os.environ.setdefault("BACKEND", "ringx")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    _tmp = tempfile.mkdtemp(prefix="ringx_conformance_")
    for _sub in ("barrier", "test_dir", "init_dir"):
        os.mkdir(os.path.join(_tmp, _sub))
    os.environ["TEMP_DIR"] = _tmp
    _creator_pid = os.getpid()
    # Only the process that created it removes it (children inherit TEMP_DIR and
    # never get here).
    atexit.register(
        lambda: os.getpid() == _creator_pid and shutil.rmtree(_tmp, ignore_errors=True)
    )

# Upstream's run_test.py runs the spawn suite with a file:// INIT_METHOD (its "init file"
# variant).  TestDistBackend.setUp overwrites it with a fresh per-test file before the
# ranks are spawned; the value seen at import time only decides whether
# test_barrier_timeout_global (gloo-only) is skipped.
os.environ.setdefault(
    "INIT_METHOD",
    "file://" + os.path.join(os.environ["TEMP_DIR"], "init_dir", "shared_init_file"),
)

BACKEND = os.environ["BACKEND"]
_BUILTIN_BACKENDS = {"gloo", "nccl", "mpi", "ucc"}
IS_PLUGIN = BACKEND not in _BUILTIN_BACKENDS

# ---- 2. register the plugin backend (module level: every spawned rank runs this) --------
if BACKEND == "ringx":
    _build_python = os.path.join(_REPO_ROOT, "build", "python")
    if os.path.isdir(_build_python) and _build_python not in sys.path:
        # Appended, so an explicit PYTHONPATH still takes precedence.
        sys.path.append(_build_python)
    try:
        import ringx  # noqa: F401  (registers the "ringx" c10d backend)
    except ImportError as e:
        raise ImportError(
            f"BACKEND=ringx but the ringx package cannot be imported ({e}). Build it "
            f"(cmake -S . -B build && cmake --build build) and put "
            f"{_build_python} on PYTHONPATH."
        ) from e

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.join(_REPO_ROOT, "tests", "python"))
import rank_processes  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False

if not dist.is_available():
    print("Distributed not available, skipping tests", file=sys.stderr)
    sys.exit(0)

# ---- 3. declare the plugin's features BEFORE distributed_test is imported --------------
# The suite evaluates DistTestCases.backend_feature in decorators at class-definition
# time.  A CPU-only plugin gets "plugin", "ddp" and "subgroup" (not "gpu"/"cuda").
from torch.testing._internal import common_distributed  # noqa: E402

if IS_PLUGIN:
    for _feature in ("plugin", "ddp", "subgroup"):
        common_distributed.DistTestCases.backend_feature[_feature].add(BACKEND)

from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.distributed import distributed_test as _dt  # noqa: E402

if common_utils.TEST_WITH_DEV_DBG_ASAN:
    print("Skip dev-asan as torch + multiprocessing spawn have known issues", file=sys.stderr)
    sys.exit(0)

if common_utils.NO_MULTIPROCESSING_SPAWN:
    print("Spawn not available, skipping tests.", file=sys.stderr)
    sys.exit(0)

# ---- 4. tests no plugin backend can pass on this torch --------------------------------
# Only tests that fail for every plugin because of torch itself belong here, each with the
# reason. Do NOT add tests for features ringx is expected to support.  Format: name -> why.
# For a plugin BACKEND the suite skips its gloo-specific tests itself (require_backend,
# skip_but_pass_in_sandcastle_if(BACKEND != "gloo"), ...). Which tests it does run for a
# plugin is measured, not assumed: make_baseline.sh runs the suite with a stand-in plugin
# that hands out gloo groups (plugin_reachable_ws<N>.txt); these skips apply to it too.
PLUGIN_SKIPS = {
    "test_ddp_logging_data_cpu": (
        "DDP logs ProcessGroup::getBackendName(), which torch 2.13 answers with "
        "backendTypeToString(CUSTOM) = 'custom' for every plugin (the wrapper, not the "
        "backend, is asked), and the test compares it with dist.get_backend() = the "
        "plugin's name"),
}


class TestDistBackendWithSpawn(_dt.TestDistBackend, _dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Upstream spawns each rank, which imports torch and this suite again (seconds a
        # rank). These ranks start from a fork server that imported this module once, each
        # with its parent's environment (the suite's per-test TEMP_DIR and INIT_METHOD):
        # tests/python/rank_processes.py.
        self._start_processes(rank_processes.context([__name__], [_HERE]).Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    @classmethod
    def _run(cls, rank, test_name, file_name, parent_pipe, **kwargs):
        # A spawned rank imported the suite under this test's environment; these ranks hold
        # the fork server's import. Of what the suite reads from the environment at import,
        # only INIT_METHOD changes from test to test (TestDistBackend.setUp): read it again.
        _dt.INIT_METHOD = os.environ["INIT_METHOD"]
        super()._run(rank, test_name, file_name, parent_pipe, **kwargs)


if IS_PLUGIN:
    for _name, _reason in PLUGIN_SKIPS.items():
        _fn = getattr(TestDistBackendWithSpawn, _name)  # AttributeError = stale entry
        setattr(
            TestDistBackendWithSpawn,
            _name,
            unittest.skip(f"not passable by plugin backend {BACKEND} on this torch: {_reason}")(_fn),
        )

# ---- 5. tests the suite gates to gloo for features that ringx implements ---------------
# distributed_test.py runs some tests only when BACKEND is gloo (or nccl/mpi) because only
# those backends had the feature. ringx has it, so for ringx that gate is lifted and the test
# must pass: ringx_ungated.txt lists them, each with the feature. Only the backend-name gate
# is lifted: a listed test keeps whatever else skips it, because its skip state is taken from
# the suite as it is defined for gloo (a second import of distributed_test with
# BACKEND=gloo, in the main process only; spawned ranks run the test body and never look at
# skip marks). run_conformance.sh counts the ungated tests that gloo passes as reachable, so
# in strict mode one that stops passing fails the run.
def read_ungated(path=os.path.join(_HERE, "ringx_ungated.txt")):
    """{test name: the ringx feature that lets it run}, from ringx_ungated.txt."""
    ungated = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                ungated[name] = reason.strip()
    return ungated


def _suite_as_gloo_sees_it():
    spec = importlib.util.spec_from_file_location("_distributed_test_for_gloo", _dt.__file__)
    module = importlib.util.module_from_spec(spec)
    saved = os.environ["BACKEND"]
    os.environ["BACKEND"] = "gloo"
    try:
        spec.loader.exec_module(module)
    finally:
        os.environ["BACKEND"] = saved
    return module.DistributedTest._DistTestBase


RINGX_UNGATED = read_ungated()
_MAIN_PROCESS = multiprocessing.current_process().name == "MainProcess"
# RINGX_CONFORMANCE_UNGATE=0 is for make_baseline.sh's stand-in plugin only (make test refuses it).
if BACKEND == "ringx" and _MAIN_PROCESS and os.environ.get("RINGX_CONFORMANCE_UNGATE", "1") == "1":
    _for_gloo = _suite_as_gloo_sees_it()
    for _name in RINGX_UNGATED:
        _fn = getattr(TestDistBackendWithSpawn, _name)  # AttributeError = stale entry
        _gloo_fn = getattr(_for_gloo, _name)
        for _attr in ("__unittest_skip__", "__unittest_skip_why__"):
            if hasattr(_fn, _attr):
                delattr(_fn, _attr)
            if hasattr(_gloo_fn, _attr):
                setattr(_fn, _attr, getattr(_gloo_fn, _attr))


# ---- 6. runtime skips decided before spawning -----------------------------------------
# skip_if_lt_x_gpu, skip_if_no_gpu, skip_if_small_worldsize and skip_if_odd_worldsize
# decide inside each spawned rank, so a test that can only skip on this machine still
# costs WORLD_SIZE interpreter start-ups with torch imported. Here the same conditions are
# evaluated before spawning, with the same skip messages, walking a test's decorators from
# the outside in: only these and decorators that pass through on this machine (the
# nccl-only GPU checks for other backends) are looked through; any other wrapper stops the
# walk and the test runs as before. RINGX_CONFORMANCE_EARLY_SKIP=0 turns it off (the
# baselines are recorded that way, so a wrong early skip shows up as a regression).
def _closure(fn):
    code = fn.__code__
    return dict(zip(code.co_freevars, (c.cell_contents for c in (fn.__closure__ or ()))))


def _skip_message(key, key_since_2_15=None):
    """The TEST_SKIPS message the ranks would exit with: torch 2.15 renamed "multi-gpu-N" to
    "multi-device-N", and its skip_if_no_gpu exits with "no_accelerator" instead of "no_cuda"."""
    known = common_distributed.TEST_SKIPS
    if key_since_2_15 and "multi-device-1" in known:
        key = key_since_2_15
    return known[key].message


def _skip_before_spawning(fn):
    """The TEST_SKIPS message the ranks would exit with, or None."""
    world_size = int(os.environ["WORLD_SIZE"])
    accelerators = {
        "cuda": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "hpu": torch.hpu.device_count() if common_distributed.TEST_HPU else 0,
        "xpu": torch.xpu.device_count() if common_distributed.TEST_XPU else 0,
    }
    any_accelerator = any(accelerators.values())
    while fn is not None and hasattr(fn, "__code__"):
        wrapper = fn.__code__.co_qualname
        if wrapper == "skip_if_lt_x_gpu.<locals>.decorator.<locals>.wrapper":
            closure = _closure(fn)
            x = closure["x"]
            enough = any(n >= x for n in accelerators.values())
            if not enough and not (closure.get("allow_cpu") and not any_accelerator):
                return _skip_message(f"multi-gpu-{x}", f"multi-device-{x}")
        elif wrapper == "skip_if_no_gpu.<locals>.wrapper":
            if not any_accelerator:
                return _skip_message("no_cuda", "no_accelerator")
            if any(0 < n < world_size for n in accelerators.values()):
                return None  # decided in the ranks, as before
        elif wrapper == "skip_if_small_worldsize.<locals>.wrapper":
            if BACKEND != "mpi" and world_size < 8:
                return _skip_message("small_worldsize")
        elif wrapper == "skip_if_odd_worldsize.<locals>.wrapper":
            if BACKEND != "mpi" and world_size % 2 == 1:
                return _skip_message("odd_worldsize")
        elif wrapper in ("nccl_skip_if_lt_x_gpu.<locals>.decorator.<locals>.wrapper",
                         "require_n_gpus_for_nccl_backend.<locals>.decorator.<locals>.wrapper"):
            if _closure(fn)["backend"] == "nccl":
                return None
        else:
            return None  # not a skip decorator, or the test itself: it runs as before
        fn = getattr(fn, "__wrapped__", None)
    return None


if os.environ.get("RINGX_CONFORMANCE_EARLY_SKIP", "1") == "1" and _MAIN_PROCESS:
    for _name in [n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_")]:
        _fn = getattr(TestDistBackendWithSpawn, _name)
        if getattr(_fn, "__unittest_skip__", False):
            continue  # skipped by unittest already, without spawning
        _why = _skip_before_spawning(_fn)
        if _why:
            setattr(TestDistBackendWithSpawn, _name, unittest.skip(_why)(_fn))

if __name__ == "__main__":
    common_utils.run_tests()
