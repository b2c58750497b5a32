#!/usr/bin/env bash
# Runs a command while every core is kept busy by competing processes (a busy loop per core,
# LOAD_PROCESSES to change how many, at the command's own priority): the machine a user's
# job, or CI, often shares. Exits with the command's status.
#   scripts/with_load.sh COMMAND [ARGS...]
set -u
LOAD=${LOAD_PROCESSES:-$(nproc)}
load=()
stop_load() { [ ${#load[@]} -eq 0 ] || kill "${load[@]}" 2>/dev/null; }
trap stop_load EXIT
for _ in $(seq "$LOAD"); do
  sh -c 'while :; do :; done' &
  load+=($!)
done
echo "with_load: $LOAD busy processes (pids ${load[*]})"
"$@"
