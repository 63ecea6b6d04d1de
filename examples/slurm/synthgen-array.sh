#!/usr/bin/env bash
# One Slurm array task per shard: task I runs `synthgen run --shard I/N` into
# its own directory OUT/shard-I, logging to OUT/logs/shard-I.log (not beside
# the shard directories, where OUT/shard-* would take a log for one), against
# the vLLM server at $VLLM_URL. The
# default job (examples/perfectblend-by-file.yaml) is split by file
# (dataset.shard_by: files): task I downloads and reads only file I of the
# dataset's six, so N is at most six; for a job split by rows give another
# JOB_CONFIG (examples/perfectblend-25k.yaml) and any N.
#
#   VLLM_URL=http://gpu-node-01:8000/v1 sbatch examples/slurm/synthgen-array.sh
#   VLLM_URL=... JOB_OUT=/data/synth/pb JOB_CONFIG=/abs/job.yaml sbatch examples/slurm/synthgen-array.sh
#
# (sbatch passes the environment on. JOB_* rather than SYNTHGEN_*: synthgen
# reads SYNTHGEN_* variables as config keys and warns about the others.)
#
# N is the array's size: change --array=0-(N-1) below and nothing else (the
# task count reaches --shard through SLURM_ARRAY_TASK_COUNT). Afterwards:
#
#   synthgen inspect /data/synth/perfectblend/shard-*
#   synthgen export /data/synth/perfectblend/shard-* --format specforge --out train.jsonl
#
# A task that ends early resumes by running again on the same directory:
# --requeue puts a preempted task back in the queue; a task that hit the
# time limit drained (exit 130) and resumes with
#   sbatch --array=I examples/slurm/synthgen-array.sh
#
#SBATCH --job-name=synthgen
#SBATCH --array=0-5
#SBATCH --cpus-per-task=2
#SBATCH --mem=4G
#SBATCH --time=24:00:00
# SIGTERM 150 s before the time limit, to the batch shell (B:), which is
# synthgen itself (exec below): it stops asking, lets the requests in flight
# finish for shutdown.grace (2m in perfectblend-by-file.yaml) and closes its
# shard, 30 s before Slurm's SIGKILL.
#SBATCH --signal=B:TERM@150
# Preemption also sends SIGTERM, but SIGKILL follows after the cluster's
# KillWait (often 30 s) or the partition's GraceTime: requests still in
# flight then are cut, and asked again when the requeued task resumes.
#SBATCH --requeue
# Slurm's own messages; appended, so that a requeued task keeps its first run's.
#SBATCH --open-mode=append
#SBATCH --output=synthgen-%A_%a.out
set -euo pipefail

: "${VLLM_URL:?set VLLM_URL to the vLLM server, e.g. http://gpu-node-01:8000/v1}"
: "${SLURM_ARRAY_TASK_ID:?run this with sbatch: it is an array job}"
config=${JOB_CONFIG:-${SLURM_SUBMIT_DIR:-.}/examples/perfectblend-by-file.yaml}
out=${JOB_OUT:-/data/synth/perfectblend}
bin=${SYNTHGEN_BIN:-synthgen}
dir=$out/shard-${SLURM_ARRAY_TASK_ID}
log=$out/logs/shard-${SLURM_ARRAY_TASK_ID}.log
mkdir -p "$out/logs"
# One Hub download cache per task: two processes fetching the same file into
# one cache would write the same partial file.
export SYNTHGEN_CACHE_DIR=${SYNTHGEN_CACHE_DIR:-$out/cache}/shard-${SLURM_ARRAY_TASK_ID}

# 50 in flight per task: 6 tasks keep the config's 300 in all on the one
# server. The log is appended: a resume must not wipe the first run's.
exec "$bin" run --config "$config" \
  --endpoint.base_url "$VLLM_URL" \
  --concurrency "${JOB_CONCURRENCY:-50}" \
  --shard "${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT}" \
  --output.dir "$dir" \
  >>"$log" 2>&1
