"""ringx.nccl() and features()["nccl"]: NCCL loaded at run time (backend/transport/nccl/loader.h).

A stub libnccl.so.2 is compiled here from tests/cpp/nccl/nccl_stub.cc (NCCL's entry points,
version 2.27.7), once complete and once without two symbols. NCCL loads once per process, so
each case runs in a fresh Python that prints what ringx reported as JSON. No GPU, no real NCCL.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
STUB_SOURCE = os.path.join(HERE, "..", "cpp", "nccl", "nccl_stub.cc")
NO_FILE = "/nonexistent/ringx-test/libnccl.so.2"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """{"good": path, "bad": path}: the stub built as is, and without ncclCommGetAsyncError and
    ncclReduceScatter."""
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no C++ compiler to build the stub libnccl.so.2")
    out = {}
    for name, flags in (("good", []), ("bad", ["-DRINGX_NCCL_STUB_LEAVE_OUT_TWO"])):
        folder = tmp_path_factory.mktemp(f"nccl-stub-{name}")
        out[name] = str(folder / "libnccl.so.2")
        subprocess.run([compiler, "-shared", "-fPIC", "-O1", *flags, "-o", out[name], STUB_SOURCE],
                       check=True)
    return out


def ringx_says(script, **env):
    """Runs `script` (which sets `result`) after `import ringx` in a fresh Python with `env`
    added (a None value unsets), and returns `result` as the JSON the script printed."""
    environ = dict(os.environ)
    environ.pop("RINGX_NCCL_LIBRARY", None)
    environ.pop("RINGX_GPU_WIRE", None)
    for key, value in env.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    code = "import json, ringx\n" + script + "\nprint('RESULT ' + json.dumps(result))\n"
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def mapped(path):
    """Python source: whether this process has `path` mapped (the dynamic loader opened it)."""
    return f"os.path.realpath({path!r}) in open('/proc/self/maps').read()"


def test_nccl_reports_the_library_it_loaded(stubs):
    result = ringx_says(f"""
import os
before = ringx.features()["nccl"]
mapped_before = {mapped(stubs["good"])}
report = ringx.nccl()
result = dict(before=before, mapped_before=mapped_before, report=report,
              mapped_after={mapped(stubs["good"])}, after=ringx.features()["nccl"],
              again=ringx.nccl())
""", RINGX_NCCL_LIBRARY=stubs["good"])
    # Nothing loads at import, nor for features() without RINGX_GPU_WIRE=nccl.
    assert result["before"]["on"] is False
    assert result["before"]["detail"].startswith("not loaded"), result["before"]
    assert result["mapped_before"] is False
    report = result["report"]
    assert report["loaded"] is True, report
    assert report["version"] == "2.27.7"
    assert report["path"] == os.path.realpath(stubs["good"])
    assert report["error"] is None
    assert len(report["tried"]) == 1 and "(RINGX_NCCL_LIBRARY)" in report["tried"][0]
    assert result["mapped_after"] is True
    assert result["after"] == {"on": True, "detail": f"NCCL 2.27.7 loaded from {report['path']}"}
    assert result["again"] == report


def test_a_bogus_path_reports_what_was_tried_and_what_to_do():
    report = ringx_says("result = ringx.nccl()", RINGX_NCCL_LIBRARY=NO_FILE)
    assert report["loaded"] is False
    assert report["version"] is None and report["path"] is None
    assert report["tried"] == [f"{NO_FILE} (RINGX_NCCL_LIBRARY): cannot open shared object "
                               "file: No such file or directory"]
    assert "could not load NCCL" in report["error"]
    assert NO_FILE in report["error"]
    assert "unset it" in report["error"], report["error"]


def test_a_library_without_every_symbol_is_refused_by_name(stubs):
    report = ringx_says("result = ringx.nccl()", RINGX_NCCL_LIBRARY=stubs["bad"])
    assert report["loaded"] is False
    assert os.path.realpath(stubs["bad"]) in report["error"]
    assert "lacks ncclCommGetAsyncError, ncclReduceScatter" in report["error"], report["error"]


def test_features_loads_nccl_when_the_job_asked_for_the_nccl_wire(stubs):
    result = ringx_says(f"""
import os
feature = ringx.features()["nccl"]
result = dict(feature=feature, mapped={mapped(stubs["good"])})
""", RINGX_NCCL_LIBRARY=stubs["good"], RINGX_GPU_WIRE="nccl")
    assert result["feature"]["on"] is True, result["feature"]
    assert "NCCL 2.27.7" in result["feature"]["detail"]
    assert result["mapped"] is True


def test_features_reports_a_failed_load_on_one_line():
    feature = ringx_says("result = ringx.features()['nccl']", RINGX_NCCL_LIBRARY=NO_FILE,
                         RINGX_GPU_WIRE="nccl")
    assert feature["on"] is False
    assert "\n" not in feature["detail"]
    assert NO_FILE in feature["detail"] and "RINGX_NCCL_LIBRARY" in feature["detail"]


def test_the_wheel_beside_torch_is_the_first_candidate():
    result = ringx_says("""
import os, torch
site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
result = dict(candidates=ringx._nccl.candidates(), site=site)
""")
    wheel = os.path.join(result["site"], "nvidia", "nccl", "lib", "libnccl.so.2")
    assert result["candidates"][0] == wheel
    if not os.path.exists(wheel):
        return
    # A CUDA torch's environment: its NCCL loads without a GPU, as found by default.
    report = ringx_says("result = ringx.nccl()")
    assert report["loaded"] is True, report
    assert report["path"] == os.path.realpath(wheel)
    assert report["version"].startswith("2.")
