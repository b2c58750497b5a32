# ringx — the two commands:
#   make demo   install what is missing, build, run traced 2-rank training jobs (ringx.ddp,
#               ringx.fsdp) on backend="ringx", and the DDP job again over TCP; print their
#               summaries, the what-if table of a DDP step across two hosts joined by a
#               1 Gbit/s link (and its largest change run for real), the diff of the two DDP
#               runs, and take ringx-viewer screenshots of them (docs/images/)
#   make test   install, build, run every test suite; non-zero exit on any failure
# and `make` alone builds (programs in build/bin/, the Python package in build/python/ringx).

PYTHON := $(shell scripts/find_python.sh)
BUILD_DIR ?= build
JOBS ?= 2

.PHONY: all setup build test test-under-load test-faults demo bench soak sanitize fuzz pip-check \
	torch-matrix \
	gpu-bundle gpu-check format clean

all: build

setup:
	@scripts/setup.sh

$(BUILD_DIR)/CMakeCache.txt: | setup
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PYTHON) >/dev/null

# The compiler's output goes to $(BUILD_DIR)/build.log; the terminal gets the progress, and the
# errors of a failed build (scripts/build.sh). V=1 prints all of it instead.
build: setup $(BUILD_DIR)/CMakeCache.txt
	@scripts/build.sh $(BUILD_DIR) $(JOBS)

test: build
	@scripts/run_tests.sh

# gtest and pytest with every core kept busy by competing processes (not run by CI):
# RUNS=3 make test-under-load runs them three times in a row (scripts/test_under_load.sh).
test-under-load: build
	@scripts/test_under_load.sh

# Builds only what the demo runs (the Python package, ringx-trace, ringx-viewer), then
# scripts/demo.sh: the jobs, their summaries, the what-if table, the screenshots.
demo: setup $(BUILD_DIR)/CMakeCache.txt
	@scripts/build.sh $(BUILD_DIR) $(JOBS) ringx_c10d_python ringx-trace ringx-viewer
	@scripts/demo.sh $(BUILD_DIR)

bench: build
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/allreduce.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/vs_libraries.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/call_cost.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/contended.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/ddp.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/fsdp.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/whatif.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/trace_overhead.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/faults.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/elastic.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/tcp_line_rate.py
	@$(BUILD_DIR)/bin/bench_trace_record
	@$(BUILD_DIR)/bin/bench_reduce_cost
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/setup_cost.py
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) bench/import_cost.py
	@$(BUILD_DIR)/bin/bench_scale_cost 16,64,256,512,1024
	@$(PYTHON) bench/viewer.py

# The fault tests at full length: ranks lost between network-namespace hosts and the survivors
# going on (tests/python/test_shrink_hosts.py), 50 seeded random kills (RINGX_KILL_SEED picks
# them; make test runs 3), and a job restarted ten times (test_restarts.py; make test: 6).
test-faults: build
	@cd tests/python && RINGX_KILL_TRIALS=$${RINGX_KILL_TRIALS:-50} RINGX_RESTARTS=10 \
		PYTHONPATH=$(CURDIR)/$(BUILD_DIR)/python \
		$(PYTHON) -m pytest -q -s test_shrink_hosts.py test_partitions.py test_restarts.py

# The long randomized soak (tests/python/soak.py): 50000 collectives of random kinds, sizes and
# dtypes on 4 ranks, overlapping subgroups, async, tracing and a live client, RSS flat.
# CI does not run it (make test runs its CI-sized form, tests/python/test_soak.py).
soak: build
	@PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) tests/python/soak.py --world-size 4 --collectives 50000

# The sanitizer and fuzzing legs: TSan, ASan+UBSan, libFuzzer (make test runs the core under TSan).
sanitize: setup
	@scripts/sanitizers.sh all

# Longer fuzzing than make test's 10 s per target (not run by CI): FUZZ_SECONDS=600 make fuzz
fuzz: setup
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-300} scripts/sanitizers.sh asan

# The README's install commands in a fresh environment holding only torch, then a torchrun
# all-reduce and DDP step (scripts/pip_check.sh, scripts/readme_install.py).
pip-check: setup
	@scripts/pip_check.sh

# ringx against every torch release from 2.9 to 2.15: compiles each (the CUDA half too), and
# installs and tests the oldest, the GPU machine's and the newest (scripts/torch_matrix.py).
# Not in make test: several GB of wheels (cached) and about an hour on 2 cores.
# TORCH_MATRIX_ARGS="--releases 2.9.1,2.15.0" runs fewer (scripts/torch_matrix.py --help).
torch-matrix: setup
	@$(PYTHON) scripts/torch_matrix.py $(TORCH_MATRIX_ARGS)

# What the GPU machine lacks for the build, in build/gpu-bundle, to carry there (scripts/gpu_bundle.sh).
gpu-bundle:
	@scripts/gpu_bundle.sh

# The GPU runbook in one command: build against the machine's CUDA torch, run every GPU test and
# bench, write a report (REPORT=dir, default build/gpu-check). Without a GPU (here) it builds
# against a CUDA torch (.venv-cuda) and reports every GPU test skipped. Not in make test.
gpu-check:
	@scripts/gpu_check.sh $(REPORT)

# .clang-format's style, by clang-format or Debian's clang-format-14 (make setup installs it).
CLANG_FORMAT ?= $(shell command -v clang-format || command -v clang-format-14)
format:
	@test -n "$(CLANG_FORMAT)" || { echo "make format: no clang-format (make setup installs clang-format-14)" >&2; exit 1; }
	@$(CLANG_FORMAT) -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD_DIR)
