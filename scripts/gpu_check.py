"""The steps of `make gpu-check` (scripts/gpu_check.sh picks the Python: one with a CUDA torch).

Each step runs whatever happened before it, and its result is recorded (passed, failed, timed
out, or skipped, with its tests' counts and skip reasons); nothing stops at the first failure.
The report goes to the directory given as the argument, as three files (the GPU machine's tool
brings back a few files only): report.md (with the end of each failed step's log),
report.json, and logs.tar.gz (every step's log and the tests' XML). They are rewritten after
every step, so a run cut short still leaves the steps it finished. Exit status: 1 if any step
failed.

Time: the GPU machine is lent for minutes, so no step may hang the rest away.
  GPU_CHECK_STEP_TIMEOUT   seconds a test or bench step may run (default 300; the build, an
                           hour); past it the step's whole process group (the ranks too) is
                           killed and the step fails "timeout"
  GPU_CHECK_DEADLINE       seconds the whole check may run (default: no limit); a step gets
                           what is left, and steps that would start after it are skipped

The GPU tests and benches are found by name, so new ones join without editing this file:
  tests/python/test_cuda*.py        pytest files (each parametrizes its world sizes)
  ringx_cuda_tests                  the gtest executable of tests/cpp/cuda/
  bench/cuda_*.py                   benchmarks, run with --quick
"""

import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import time

from junit_results import test_results

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(REPO, "build", "gpu-bundle", "root")
BUILD = os.environ.get("GPU_CHECK_BUILD", os.path.join(REPO, "build-gpu"))
JOBS = os.environ.get("JOBS", str(os.cpu_count() or 2))


STEP_TIMEOUT = float(os.environ.get("GPU_CHECK_STEP_TIMEOUT", "300"))
DEADLINE = os.environ.get("GPU_CHECK_DEADLINE")


class Check:
    def __init__(self, log_dir, report_dir):
        self.dir = log_dir
        self.report_dir = report_dir
        self.facts = {}
        self.steps = []
        self.deadline = time.monotonic() + float(DEADLINE) if DEADLINE else None

    def time_left(self):
        return None if self.deadline is None else self.deadline - time.monotonic()

    def run(self, name, cmd, env=None, junit=None, cwd=REPO, limit=None):
        """Runs one step's command, logging to <name>.log; `junit`: its test results' XML;
        `limit`: its seconds, where not GPU_CHECK_STEP_TIMEOUT."""
        left = self.time_left()
        if left is not None and left < 10:
            self.skip(name, f"GPU_CHECK_DEADLINE ({DEADLINE} s) reached")
            return False
        timeout = limit or STEP_TIMEOUT
        if left is not None:
            timeout = min(timeout, left)
        log = os.path.join(self.dir, f"{name}.log")
        start = time.time()
        print(f"gpu-check: {name}: {' '.join(cmd)}", flush=True)
        try:
            with open(log, "w") as out:
                # Its own process group, so a timeout kills the ranks it started as well.
                proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    rc = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    rc = "timeout"
                    out.write(f"\ngpu-check: killed after {timeout:.0f} s (GPU_CHECK_STEP_TIMEOUT"
                              f" {STEP_TIMEOUT:.0f}, GPU_CHECK_DEADLINE {DEADLINE})\n")
        except OSError as e:
            with open(log, "a") as out:
                out.write(f"could not run: {e}\n")
            rc = "not run"
        step = {"step": name, "command": " ".join(cmd), "seconds": round(time.time() - start, 1),
                "rc": rc, "log": os.path.basename(log)}
        if junit:
            step["tests"] = test_results(junit)
        step["status"] = verdict(step)
        if step["status"] == "failed":
            with open(log) as f:
                step["log_tail"] = f.read()[-3000:]
        self.steps.append(step)
        print(f"gpu-check: {name}: {step['status']} ({step['seconds']} s)", flush=True)
        self.write()
        return step["status"] != "failed"

    def skip(self, name, why):
        self.steps.append({"step": name, "status": "skipped", "why": why})
        print(f"gpu-check: {name}: skipped ({why})", flush=True)
        self.write()

    def write(self):
        """The report and the logs so far."""
        text = write_report(self.report_dir, self.facts, self.steps)
        with tarfile.open(os.path.join(self.report_dir, "logs.tar.gz"), "w:gz") as tar:
            tar.add(self.dir, arcname="gpu-check-logs")
        return text


def verdict(step):
    if step["rc"] != 0:
        return "failed"
    tests = step.get("tests")
    if tests is not None:
        if tests["failed"]:
            return "failed"
        if tests["passed"] == 0:
            return "skipped" if tests["skipped"] else "failed"  # no test ran at all: a failure
    return "passed"


def environment():
    import torch
    facts = {"python": sys.version.split()[0], "python_path": sys.executable,
             "torch": torch.__version__, "torch_cuda": torch.version.cuda,
             "cuda_available": torch.cuda.is_available(), "machine": platform.node(),
             "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        facts["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if os.path.exists(nvcc):
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        facts["nvcc"] = out.strip().splitlines()[-1] if out.strip() else None
    return facts


def write_report(report_dir, facts, steps):
    failed = [s["step"] for s in steps if s["status"] == "failed"]
    with open(os.path.join(report_dir, "report.json"), "w") as f:
        json.dump({"environment": facts, "steps": steps, "failed": failed}, f, indent=1)
    lines = ["# ringx gpu-check", ""]
    lines += [f"- {k}: {v}" for k, v in facts.items()]
    lines += ["", "| step | status | seconds | tests passed / failed / skipped | notes |",
              "|---|---|---|---|---|"]
    for s in steps:
        tests = s.get("tests")
        counts = f"{tests['passed']} / {tests['failed']} / {tests['skipped']}" if tests else ""
        notes = s.get("why", "")
        if tests and tests["skip_reasons"]:
            notes = "; ".join(f"{n} skipped: {why}" for why, n in tests["skip_reasons"].items())
        if tests and tests["failures"]:
            notes = "failed: " + ", ".join(tests["failures"][:8])
        if s["status"] == "failed" and not notes:
            notes = f"exit status {s['rc']}; see {s['log']} in logs.tar.gz"
        lines.append(f"| {s['step']} | {s['status']} | {s.get('seconds', '')} | {counts} | "
                     f"{notes.replace('|', '/')} |")
    lines += ["", f"**{'FAILED: ' + ', '.join(failed) if failed else 'no step failed'}**"]
    for s in steps:
        if s["status"] == "failed" and s.get("log_tail"):
            lines += ["", f"## {s['step']}: end of {s['log']}", "", "```",
                      s["log_tail"].strip()[-2500:], "```"]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(report_dir, "report.md"), "w") as f:
        f.write(text)
    return text


def main():
    report_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                                 os.path.join(REPO, "build", "gpu-check"))
    os.makedirs(report_dir, exist_ok=True)
    logs = os.path.join(BUILD, "gpu-check-logs")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    status = run_steps(Check(logs, report_dir))
    print(f"gpu-check: report in {report_dir}/report.md (logs: {report_dir}/logs.tar.gz)")
    return status


def run_steps(check):
    facts = check.facts = environment()
    print("gpu-check: " + json.dumps(facts), flush=True)

    # GoogleTest from the bundle's sources, built with this machine's compiler; nlohmann-json
    # and CLI11 are headers with CMake files, simdjson and zlib libraries for ringx-trace.
    # Without a bundle, the system's packages.
    prefix = []
    if os.path.isdir(BUNDLE):
        deps = os.path.join(BUILD, "deps")
        gtest = os.path.join(BUNDLE, "usr", "src", "googletest")
        check.run("googletest", ["cmake", "-S", gtest, "-B", os.path.join(BUILD, "gtest"),
                                 "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_GMOCK=OFF",
                                 f"-DCMAKE_INSTALL_PREFIX={deps}"])
        check.run("googletest-install", ["cmake", "--build", os.path.join(BUILD, "gtest"), "-j",
                                         JOBS, "--target", "install"])
        prefix = [deps, os.path.join(BUNDLE, "usr")]
    else:
        check.skip("googletest", "no build/gpu-bundle: the system's GoogleTest, nlohmann-json, CLI11")

    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configured = check.run("configure", [
        "cmake", "-S", REPO, "-B", BUILD, *generator, "-DCMAKE_BUILD_TYPE=Release",
        f"-DPython3_EXECUTABLE={sys.executable}", "-DRINGX_BUILD_CUDA=ON",
        "-DRINGX_BUILD_VIEWER=OFF", "-DRINGX_BUILD_TOOLS=ON", "-DRINGX_BUILD_SAMPLES=OFF",
        "-DRINGX_BUILD_TESTS=ON",
        f"-DCMAKE_PREFIX_PATH={';'.join(prefix)}"])
    built = configured and check.run("build", [
        "cmake", "--build", BUILD, "-j", JOBS, "--target", "ringx_c10d_python", "ringx_cuda_tests",
        "ringx-trace"],  # the torch-engine watcher's GPU tests export their traces with it
        limit=3600)
    if not built:
        check.skip("tests", "the build failed")
        print(check.write())
        return 1

    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    check.run("cuda-built", [sys.executable, "-c", (
        "import torch.distributed as dist, ringx\n"
        "print(ringx.features())\n"
        "assert ringx._C.cuda_built(), 'built against a CUDA torch, but ringx has no CUDA: ' + "
        "ringx.features()['cuda']['detail']\n"
        "assert dist.Backend.backend_capability['ringx'] == ['cpu', 'cuda']\n")], env=env)

    xml = os.path.join(check.dir, "ringx_cuda_tests.xml")
    check.run("ringx_cuda_tests", [os.path.join(BUILD, "bin", "ringx_cuda_tests"),
                                   f"--gtest_output=xml:{xml}"], junit=xml)
    for test in sorted(glob.glob(os.path.join(REPO, "tests", "python", "test_cuda*.py"))):
        name = os.path.splitext(os.path.basename(test))[0]
        xml = os.path.join(check.dir, f"{name}.xml")
        # A test running for two minutes prints the test process's stacks (the ranks print
        # theirs before the harness kills them: tests/python/harness.py).
        stacks = 120
        check.run(name, [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                         "-o", f"faulthandler_timeout={stacks}",
                         f"--junitxml={xml}", os.path.basename(test)],
                  env=env, junit=xml, cwd=os.path.join(REPO, "tests", "python"))
    import torch
    for bench in sorted(glob.glob(os.path.join(REPO, "bench", "cuda_*.py"))):
        name = os.path.splitext(os.path.basename(bench))[0]
        if not torch.cuda.is_available():
            check.skip(name, "no CUDA device")
            continue
        check.run(name, [sys.executable, bench, "--quick"], env=env)

    print(check.write())
    return 1 if any(s["status"] == "failed" for s in check.steps) else 0


if __name__ == "__main__":
    sys.exit(main())
