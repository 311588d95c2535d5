#!/bin/bash
# TensorFlow multi-worker (no Horovod) on the machines of examples/openmpi/hosts. Same
# requirements as horovod.sh, without Horovod. The ranks learn each other's host names by one
# MPI all-gather and listen on ports OPEN_SEQ2SEQ_PORT + rank (default: derived from the
# job id); set OPEN_SEQ2SEQ_HOSTS=node1,node1,node2,node2 to name the addresses instead.
set -euo pipefail
CONFIG=${CONFIG:-example_configs/text2text/en-es/transformer-2x2-bible.py}
LOGDIR=${LOGDIR:-/shared/runs/bible-multi-worker}
mpiexec --hostfile examples/openmpi/hosts -np 4 --map-by slot --bind-to none \
  -x PATH -x LD_LIBRARY_PATH \
  python run.py --config_file="$CONFIG" --mode=train_eval \
  --logdir="$LOGDIR" --continue_learning
