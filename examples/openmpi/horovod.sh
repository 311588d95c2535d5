#!/bin/bash
# Horovod on the machines of examples/openmpi/hosts, one rank per slot. Run it on node1 from
# the repository. Every machine needs the repository at this same path, the same Python
# environment (with Horovod: scripts/install_horovod.sh), a copy of the data, and the log
# directory on storage they all mount (LOGDIR); mpiexec reaches the others by ssh.
set -euo pipefail
CONFIG=${CONFIG:-example_configs/text2text/en-es/transformer-2x2-bible.py}
LOGDIR=${LOGDIR:-/shared/runs/bible-horovod}
mpiexec --hostfile examples/openmpi/hosts -np 4 --map-by slot --bind-to none \
  -x PATH -x LD_LIBRARY_PATH \
  python run.py --config_file="$CONFIG" --mode=train_eval --use_horovod=True \
  --logdir="$LOGDIR" --continue_learning
