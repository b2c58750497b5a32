#!/usr/bin/env python3
"""`make torch-matrix`: ringx against every torch release it supports, 2.9 to 2.15.

For each release (the newest patch of each minor release, RELEASES):
  1. compile: the Python extension, and with nvcc the CUDA half (the kernels, and collectives
     on CUDA tensors), against that release's own headers and libraries: its PyPI wheel (the
     CUDA build) unpacked, never imported;
  2. for the oldest, the GPU machine's and the newest (INSTALLED): torch installed for real in
     a fresh virtual environment of its own (a CUDA torch runs on the CPU without a GPU), ringx
     installed there as a user does, by the README's install commands as the README prints
     them, then a 2-rank torchrun all-reduce and DDP step (scripts/readme_install.py, the
     check make pip-check runs), then on the CPU:
     a subset of the Python tests (PYTEST_SUBSET: the c10d API, torch's DDP and FSDP2 and
     ringx's own engines against single-process numerics) and PyTorch's conformance suite at
     world size 2, strict against a baseline taken from that release's own gloo run.
Prints one table (and writes it to build/torch-matrix/report.md, with report.json).

Wheels and unpacked wheels are cached (RINGX_CACHE, default ~/.cache/ringx/torch-matrix), so a
second run downloads only what pip's own cache lacks; each run makes its environments anew
(build/torch-matrix/<release>/venv). Not part of `make test`: it
downloads several GB once and takes about an hour on 2 cores.

  scripts/torch_matrix.py [--releases 2.9.1,2.15.0] [--installed 2.15.0] [--no-tests]
  scripts/torch_matrix.py --header-check 2.11.0   (make test: the compat header, one release)
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import readme_install
from junit_results import test_results

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASES = ["2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]
INSTALLED = ["2.9.1", "2.11.0", "2.15.0"]  # the oldest, the GPU machine's, the newest
# The tests run on each installed release (tests/python): the c10d API (every collective,
# torch 2.x's Backend API, groups and rendezvous, errors), torch's DDP with comm hooks and
# FSDP/FSDP2/DTensor against single-process training, ringx's own DDP and FSDP engines, shrink
# (dist.shrink_group from 2.10, ringx's own before), reconfigure (2.14 on) and a group's timeout
# set through torch (_set_pg_timeout before 2.14, which ringx replaces; set_timeout after) (the
# engines' C++ samples and trace exports are left out: pip builds no programs, ringx-trace
# included).
PYTEST_SUBSET = [
    "test_collectives.py", "test_torch2_api.py", "test_init_and_groups.py",
    "test_small_collectives.py", "test_failures.py", "test_ddp.py", "test_comm_hooks.py",
    "test_torch_parallelism.py", "test_ringx_ddp.py", "test_ringx_fsdp.py", "test_cuda.py",
    "test_shrink.py", "test_reconfigure.py", "test_set_timeout.py",
]
PYTEST_DESELECT = "not cpp_sample and not test_trace_has"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def pip_env():
    """pip as from PyPI alone: this matrix wants exact releases, whatever local caps or
    wheel folders a machine's pip configuration adds (this machine kind caps torch<=2.14.1)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PIP_CONSTRAINT", "PIP_FIND_LINKS", "PIP_INDEX_URL",
                        "PIP_EXTRA_INDEX_URL")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(cmd, log=None, env=None, cwd=REPO):
    """Runs cmd; with `log`, its output goes there. Returns the exit status."""
    if log is None:
        return subprocess.run(cmd, env=env, cwd=cwd).returncode
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def python_tag():
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def download(requirement, dest):
    """Downloads a wheel (no dependencies) for this Python and x86_64 Linux into dest; returns
    pip's exit status."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
           "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", "-d", dest]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    return subprocess.run(cmd + [requirement], env=pip_env()).returncode


def torch_wheel(cache, release):
    wheels = os.path.join(cache, "wheels")
    os.makedirs(wheels, exist_ok=True)
    pattern = os.path.join(wheels, f"torch-{release}-*{python_tag()}-*.whl")
    found = [w for w in glob.glob(pattern) if "+cpu" not in w]
    if not found:
        print(f"torch-matrix: downloading torch {release}", flush=True)
        if download(f"torch=={release}", wheels) != 0:
            raise RuntimeError(f"pip could not download torch {release}")
        found = [w for w in glob.glob(pattern) if "+cpu" not in w]
    return found[0]


def unpacked_torch(cache, release):
    """The release's torch package unpacked (headers, libraries, version.py): enough to compile
    and link the extension against (cmake/RingxTorch.cmake). Returns the torch directory."""
    root = os.path.join(cache, "unpacked", release)
    done = os.path.join(root, ".complete")
    if not os.path.exists(done):
        wheel = torch_wheel(cache, release)
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        print(f"torch-matrix: unpacking {os.path.basename(wheel)}", flush=True)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(root, [n for n in z.namelist()
                                if n.startswith(("torch/include/", "torch/lib/"))
                                or n == "torch/version.py"])
        open(done, "w").close()
    return os.path.join(root, "torch")


def torch_cuda(torch_dir):
    with open(os.path.join(torch_dir, "version.py")) as f:
        m = re.search(r"^cuda[^=\n]*= *'([^']+)'", f.read(), re.M)
    return m.group(1) if m else None


def has_cuda_staging(library):
    """Whether the c10d library holds collectives on CUDA tensors (backend/c10d/cuda_staging.cc
    built with RINGX_WITH_CUDA: its RingCudaWork), whatever object file a unity build put it in
    (the file's own object, looked for until make test's unity builds, is never written)."""
    if not os.path.exists(library):
        return False
    done = subprocess.run(["nm", "-C", library], capture_output=True, text=True)
    return done.returncode == 0 and "RingCudaWork" in done.stdout


def compile_release(cache, release, out):
    """Compiles the extension (and the CUDA half) against the unpacked wheel; returns the row's
    compile fields."""
    torch_dir = unpacked_torch(cache, release)
    build = os.path.join(out, release, "build")
    log = os.path.join(out, release, "compile.log")
    os.makedirs(build, exist_ok=True)
    open(log, "w").close()
    launcher = []
    if shutil.which("ccache"):  # the torch-free core is the same in every build
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
    start = time.time()
    ok = run(["cmake", "-S", REPO, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
              f"-DPython3_EXECUTABLE={sys.executable}", f"-DRINGX_TORCH_DIR={torch_dir}",
              "-DRINGX_BUILD_TESTS=OFF", "-DRINGX_BUILD_VIEWER=OFF", "-DRINGX_BUILD_TOOLS=OFF",
              "-DRINGX_BUILD_SAMPLES=OFF",
              "-DRINGX_BUILD_CUDA=ON"] + launcher, log) == 0
    if ok:
        # -k: a failure in one file does not hide the others' (the log names every one).
        run(["cmake", "--build", build, "-j", os.environ.get("JOBS", "2"), "--target",
             "ringx_c10d_python", "--", "-k"], log)
    extension = bool(glob.glob(os.path.join(build, "python", "ringx", "_C*.so")))
    cuda = torch_cuda(torch_dir)
    cuda_half = None  # a CPU torch has no CUDA half to compile
    if cuda:
        kernels = os.path.exists(os.path.join(build, "libringx_cuda.a"))
        cuda_half = kernels and has_cuda_staging(os.path.join(build, "libringx_c10d.a"))
    with open(log) as f:
        errors = [l.strip() for l in f if ": error:" in l or "CMake Error" in l][:5]
    return {"torch": release, "torch_cuda": cuda, "compiles": extension, "cuda_half": cuda_half,
            "compile_s": round(time.time() - start), "errors": errors}


def base_python():
    """A Python of this one's version that can make virtual environments."""
    return os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")


def environment(cache, release, out, log):
    """A fresh virtual environment holding torch `release` (the cached wheel, its dependencies
    from PyPI) and nothing else, as the README's install starts from; returns its python."""
    venv = os.path.join(out, release, "venv")
    shutil.rmtree(venv, ignore_errors=True)
    if run([base_python(), "-m", "venv", venv], log) != 0:
        raise RuntimeError("could not make a virtual environment")
    py = os.path.join(venv, "bin", "python")
    if run([py, "-m", "pip", "install", "-q", torch_wheel(cache, release)], log,
           env=pip_env()) != 0:
        raise RuntimeError(f"could not install torch {release} and its dependencies")
    return py


def wrong_build_refused(py, release, out, env):
    """Imports another release's build of ringx (compiled by this matrix) under this torch: it
    must be an ImportError naming both versions. Returns a verdict for the report."""
    for other in ["2.13.0"] + RELEASES:  # the release make test builds with, first
        package = os.path.join(out, other, "build", "python")
        if other != release and glob.glob(os.path.join(package, "ringx", "_C*.so")):
            break
    else:
        return None
    probe = subprocess.run([py, "-c", "import ringx"], capture_output=True, text=True, cwd="/",
                           env=dict(env, PYTHONPATH=package, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    last = (probe.stderr.strip().splitlines() or [""])[-1]
    ok = (probe.returncode != 0 and last.startswith("ImportError: ringx was built against torch")
          and other in last and release in last)
    return {"ok": ok, "built_for": other, "message": last[:300]}


def test_release(cache, release, out, row):
    """Installs torch and ringx in the release's environment and runs the subset there."""
    folder = os.path.join(out, release)
    log = os.path.join(folder, "install.log")
    open(log, "w").close()
    py = environment(cache, release, out, log)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed ringx, not build/python
    # The README's install commands as printed there, then the torchrun job (the one check
    # make pip-check runs too).
    start = time.time()
    readme = readme_install.run(py, os.path.join(folder, "readme-install"), env=pip_env())
    row["pip_install"] = readme["install"]
    row["pip_install_s"] = round(time.time() - start)
    row["torchrun"] = readme["torchrun"]
    if not row["pip_install"]:
        row["pip_failed"] = readme["failed"]
        return
    probe = subprocess.run([py, "-c", "import json, ringx; print(json.dumps(ringx.features()))"],
                           capture_output=True, text=True, cwd="/", env=env)
    row["features"] = json.loads(probe.stdout) if probe.returncode == 0 else probe.stderr[-400:]
    row["wrong_build"] = wrong_build_refused(py, release, out, env)
    # What the tests need besides torch and ringx.
    if run([py, "-m", "pip", "install", "-q", "numpy", "pytest", "expecttest"], log,
           env=pip_env()) != 0:
        raise RuntimeError(f"could not install the test tools beside torch {release}")

    junit = os.path.join(folder, "pytest.xml")
    start = time.time()
    run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
         "-k", PYTEST_DESELECT] + [os.path.join("tests", "python", t) for t in PYTEST_SUBSET],
        os.path.join(folder, "pytest.log"), env=env)
    row["tests"] = test_results(junit)
    row["tests"]["run"] = row["tests"]["passed"] + row["tests"]["failed"]
    row["tests_s"] = round(time.time() - start)

    # Conformance at world size 2, strict against this release's own gloo baseline.
    baseline = os.path.join(folder, "baseline")
    os.makedirs(baseline, exist_ok=True)
    start = time.time()
    conf_env = dict(env, PYTHON=py, RINGX_USE_INSTALLED="1", BASELINE_OUT=baseline,
                    CONFORMANCE_OUT=os.path.join(folder, "conformance"), STRICT_BASELINE="1",
                    BASELINE_DIR=baseline)
    run(["tests/conformance/make_baseline.sh", "2"], os.path.join(folder, "baseline.log"),
        env=conf_env)
    conformance_log = os.path.join(folder, "conformance.log")
    open(conformance_log, "w").close()
    row["conformance_ok"] = run(["tests/conformance/run_conformance.sh", "ringx", "2"],
                                conformance_log, env=conf_env) == 0
    with open(conformance_log) as f:
        text = f.read()
    m = re.search(r"vs gloo baseline \([^)]*\): (\d+)/(\d+) also pass here", text)
    counts = re.search(r"ws=2: (\d+) passed, (\d+) failed", text)
    reach = re.search(r"plugin-reachable baseline tests not passing: (\d+)", text)
    row["conformance"] = {
        "gloo_passing": int(m.group(2)) if m else None,
        "also_pass": int(m.group(1)) if m else None,
        "ringx_passed": int(counts.group(1)) if counts else None,
        "ringx_failed": int(counts.group(2)) if counts else None,
        "regressions": int(reach.group(1)) if reach else None,
    }
    row["conformance_s"] = round(time.time() - start)


def cell_tests(row):
    t = row.get("tests")
    if not t:
        return "pip install failed" if row.get("pip_install") is False else "-"
    return f"{t['run']} / {t['passed']} / {t['failed']}"


def cell_conformance(row):
    c = row.get("conformance")
    if not c or c["also_pass"] is None:
        return "-" if "conformance" not in row else "did not run"
    verdict = "ok" if row["conformance_ok"] else "FAILED"
    return (f"{c['also_pass']}/{c['gloo_passing']} of gloo's passing tests pass on ringx "
            f"({c['ringx_passed']} passed, {c['ringx_failed']} failed, "
            f"{c['regressions']} regressions): {verdict}")


def yes_no(value):
    return "-" if value is None else ("yes" if value else "NO")


def cell_install(row):
    if "pip_install" not in row:
        return "-"
    if not row["pip_install"]:
        return f"the README's install FAILED at `{row.get('pip_failed')}`"
    wrong = row.get("wrong_build")
    refused = "-" if wrong is None else (
        f"{wrong['built_for']} build refused" if wrong["ok"] else "wrong build NOT refused")
    return f"torchrun {'ok' if row.get('torchrun') else 'FAILED'}; {refused}"


def report(rows, out):
    lines = ["| torch | compiles | CUDA half compiles | tests run / passed / failed | "
             "conformance ringx vs gloo (world size 2) | the README's install, then a "
             "torchrun all-reduce + DDP step; another release's build |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        cuda = yes_no(row["cuda_half"])
        if row["torch_cuda"]:
            cuda += f" (CUDA {row['torch_cuda']})"
        lines.append(f"| {row['torch']} | {yes_no(row['compiles'])} | {cuda} | "
                     f"{cell_tests(row)} | {cell_conformance(row)} | {cell_install(row)} |")
    text = "\n".join(lines)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return text


def passed(row):
    if not row["compiles"] or row["cuda_half"] is False:
        return False
    if "tests" in row and (row["tests"]["failed"] or not row["tests"]["run"]):
        return False
    if "conformance_ok" in row and not row["conformance_ok"]:
        return False
    if row.get("wrong_build") and not row["wrong_build"]["ok"]:
        return False
    return row.get("pip_install", True) and row.get("torchrun", True)


def header_check(cache, release):
    """make test's fast check: tests/compat/torch_compat_check.cc (the compat header and the
    backend class) compiled, syntax only, against `release`'s headers; returns the exit status."""
    wheel = torch_wheel(cache, release)
    headers = os.path.join(cache, "headers", release)
    if not os.path.exists(os.path.join(headers, ".complete")):
        shutil.rmtree(headers, ignore_errors=True)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(headers, [n for n in z.namelist() if n.startswith("torch/include/")])
        open(os.path.join(headers, ".complete"), "w").close()
    include = os.path.join(headers, "torch", "include")
    # The defines torch's CMake target gives c10d's users; its wheels use the C++11 ABI.
    cmd = [os.environ.get("CXX", "c++"), "-std=c++20", "-fsyntax-only", "-I", REPO, "-I", include,
           "-I", os.path.join(include, "torch", "csrc", "api", "include"), "-DUSE_DISTRIBUTED",
           "-DUSE_C10D_GLOO", "-D_GLIBCXX_USE_CXX11_ABI=1",
           os.path.join(REPO, "tests", "compat", "torch_compat_check.cc")]
    start = time.time()
    rc = subprocess.run(cmd).returncode
    print(f"torch-matrix: backend/c10d/torch_compat.h and the backend class "
          f"{'compile' if rc == 0 else 'do NOT compile'} against torch {release}'s headers "
          f"({time.time() - start:.0f} s)")
    return rc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", default=",".join(RELEASES))
    parser.add_argument("--installed", default=",".join(INSTALLED),
                        help="the releases installed for real and tested")
    parser.add_argument("--no-tests", action="store_true", help="compile only")
    parser.add_argument("--out", default=os.path.join(REPO, "build", "torch-matrix"))
    parser.add_argument("--header-check", metavar="RELEASE",
                        help="only compile tests/compat/torch_compat_check.cc against RELEASE's "
                             "headers (make test's fast check)")
    args = parser.parse_args()
    cache = os.environ.get("RINGX_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ringx", "torch-matrix")
    if args.header_check:
        return header_check(cache, args.header_check)
    installed = set() if args.no_tests else set(filter(None, args.installed.split(",")))
    rows = []
    for release in filter(None, args.releases.split(",")):
        print(f"torch-matrix: torch {release}: compiling", flush=True)
        row = compile_release(cache, release, args.out)
        print(f"torch-matrix: torch {release}: extension {yes_no(row['compiles'])}, CUDA half "
              f"{yes_no(row['cuda_half'])} ({row['compile_s']} s)", flush=True)
        if release in installed:
            print(f"torch-matrix: torch {release}: installing and testing", flush=True)
            test_release(cache, release, args.out, row)
            print(f"torch-matrix: torch {release}: tests {cell_tests(row)}; conformance "
                  f"{cell_conformance(row)}", flush=True)
        rows.append(row)
        report(rows, args.out)
    print(report(rows, args.out))
    bad = [row["torch"] for row in rows if not passed(row)]
    print(f"torch-matrix: {len(rows) - len(bad)} of {len(rows)} releases passed"
          + (f"; failed: {', '.join(bad)} (logs in {args.out}/<release>/)" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
