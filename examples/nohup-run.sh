#!/usr/bin/env bash
# Start a synthgen job detached from the terminal, with absolute paths so that
# it does not matter where it is launched from, and the log beside the config
# (job.yaml -> job.log; SYNTHGEN_LOG names another).
#
#   examples/nohup-run.sh /abs/path/job.yaml [extra synthgen flags...]
#
# Rerun the same line after a crash or a reboot: the job resumes.
set -euo pipefail
config=$(realpath "${1:?usage: $0 CONFIG.yaml [flags...]}")
shift
here=$(cd "$(dirname "$(realpath "$0")")/.." && pwd)
# Built every time (go build is incremental: a moment when nothing changed),
# so that after a git pull the old bin/synthgen never runs silently.
# SYNTHGEN_BIN names a binary to run as it is instead.
if [[ -n ${SYNTHGEN_BIN:-} ]]; then
  bin=$SYNTHGEN_BIN
else
  (cd "$here" && make --no-print-directory build >&2)
  bin=$here/bin/synthgen
fi
log=${SYNTHGEN_LOG:-${config%.*}.log}   # default: beside the config, job.yaml -> job.log
mkdir -p "$(dirname "$log")"
nohup "$bin" run --config "$config" "$@" >>"$log" 2>&1 &
echo "synthgen started: pid $!, log $log"
echo "follow it with: tail -f $log"
