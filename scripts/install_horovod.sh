#!/usr/bin/env bash
# Installs Open MPI (Debian packages) and Horovod 0.28.1 for TensorFlow, built from its PyPI
# source release. Idempotent: does nothing when both are already there.
#
# Why a patched build: stock Horovod 0.28.1 includes XLA headers from
# horovod/tensorflow/xla_mpi_ops.cc whenever TensorFlow >= 2.6, but those headers moved out of
# the TensorFlow wheel (TF >= 2.19), so the build fails. The XLA ops are only compiled for GPU
# builds anyway, so we make that include block conditional on HAVE_GPU.
#
# Usage:
#   bash scripts/install_horovod.sh            # CPU build (MPI controller, TensorFlow only)
#   HOROVOD_GPU_OPERATIONS=NCCL bash scripts/install_horovod.sh   # GPU build, see below
#
# GPU / NCCL builds (on a machine with CUDA and NCCL installed) -- set before running:
#   HOROVOD_GPU_OPERATIONS=NCCL      all-reduce/all-gather/broadcast on the GPU through NCCL
#   HOROVOD_NCCL_HOME=/usr/local/nccl  (or HOROVOD_NCCL_INCLUDE / HOROVOD_NCCL_LIB) if NCCL is
#                                    not in a default path
#   HOROVOD_CUDA_HOME=/usr/local/cuda  CUDA toolkit location
#   HOROVOD_BUILD_CUDA_CC_LIST=70,80   compute capabilities to compile for
#   The script then compiles with HAVE_GPU, which keeps the XLA block; that needs a TensorFlow
#   wheel that ships the XLA headers under tensorflow/compiler/xla (GPU builds of TF).
# Other knobs: HOROVOD_WITH_GLOO=1 also builds the Gloo controller (`horovodrun --gloo`, no MPI
# needed; a few more minutes of compile), MAKEFLAGS (default -j2).
set -euo pipefail

HOROVOD_VERSION=0.28.1
export DEBIAN_FRONTEND=noninteractive

have_mpi() { command -v mpiexec >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }

have_horovod() {
  python - <<EOF >/dev/null 2>&1
import horovod, horovod.tensorflow as hvd
assert horovod.__version__ == "$HOROVOD_VERSION", horovod.__version__
assert hvd.mpi_built()
EOF
}

if ! have_mpi; then
  echo "[install_horovod] installing Open MPI from Debian packages"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
fi
echo "[install_horovod] $(mpiexec --version 2>&1 | head -1)"

if have_horovod; then
  echo "[install_horovod] horovod $HOROVOD_VERSION with MPI already installed"
  exit 0
fi

python -c "import tensorflow" 2>/dev/null || {
  echo "[install_horovod] TensorFlow must be installed first (pip install tensorflow-cpu)" >&2
  exit 1
}

WORK=$(mktemp -d /tmp/horovod-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
echo "[install_horovod] downloading horovod $HOROVOD_VERSION source release"
pip download -q --no-binary :all: --no-deps "horovod==$HOROVOD_VERSION" -d .
tar xzf "horovod-$HOROVOD_VERSION.tar.gz"
SRC="$WORK/horovod-$HOROVOD_VERSION"

# Make the XLA include block conditional on GPU builds (see the header of this file).
XLA_OPS="$SRC/horovod/tensorflow/xla_mpi_ops.cc"
sed -i 's/^#if TENSORFLOW_VERSION >= 2006000000$/#if TENSORFLOW_VERSION >= 2006000000 \&\& HAVE_GPU/' "$XLA_OPS"
grep -q '^#if TENSORFLOW_VERSION >= 2006000000 && HAVE_GPU$' "$XLA_OPS" || {
  echo "[install_horovod] could not patch $XLA_OPS (unexpected source layout)" >&2
  exit 1
}

export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
export HOROVOD_WITH_MPI=1
if [ "${HOROVOD_WITH_GLOO:-0}" != 1 ]; then
  unset HOROVOD_WITH_GLOO
  export HOROVOD_WITHOUT_GLOO=1
fi
export MAKEFLAGS="${MAKEFLAGS:--j2}"
echo "[install_horovod] building horovod (several minutes; GPU ops: ${HOROVOD_GPU_OPERATIONS:-none})"
# --no-build-isolation: build against the TensorFlow already installed, not a fresh copy.
pip install -q --no-build-isolation --no-cache-dir "$SRC"

have_horovod || { echo "[install_horovod] horovod installed but does not import" >&2; exit 1; }
echo "[install_horovod] done: horovod $HOROVOD_VERSION (MPI)"
