#!/usr/bin/env bash
# Fetches Fashion-MNIST (60k/10k grey 28x28 images, MIT) from Debian's dataset-fashion-mnist
# package without installing it (apt-get download + dpkg -x: no root needed) and converts it
# into the CIFAR-10 binary layout that CifarDataLayer reads (idempotent):
#
#   bash scripts/get_fashion_mnist.sh [TARGET_DIR]    # default: data/fashion_mnist
#
# TARGET_DIR/cifar/ then holds data_batch_{1..5}.bin, test_batch.bin and batches.meta.txt
# (what example_configs/image2label/resnet_fashion_mnist.py and the learning test read);
# TARGET_DIR/.gitignore keeps the ~200 MB out of git. If the package is installed already
# (/usr/share/datasets/fashion-mnist), its files are used instead of a download.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${1:-$ROOT/data/fashion_mnist}
PACKAGE=dataset-fashion-mnist
INSTALLED=/usr/share/datasets/fashion-mnist

if [ -f "$TARGET/cifar/test_batch.bin" ] && [ -f "$TARGET/cifar/data_batch_5.bin" ]; then
  echo "Fashion-MNIST already in $TARGET/cifar"
  exit 0
fi
mkdir -p "$TARGET"
echo "*" > "$TARGET/.gitignore"

if [ -f "$INSTALLED/t10k-labels-idx1-ubyte.gz" ]; then
  IDX_DIR=$INSTALLED
else
  IDX_DIR=$TARGET/deb/usr/share/datasets/fashion-mnist
  if [ ! -f "$IDX_DIR/t10k-labels-idx1-ubyte.gz" ]; then
    DOWNLOAD=$(mktemp -d)
    trap 'rm -rf "$DOWNLOAD"' EXIT
    chmod 777 "$DOWNLOAD"  # apt's download user (_apt) must be able to write there
    if ! (cd "$DOWNLOAD" && apt-get download -qq "$PACKAGE" 2>/dev/null); then
      echo "apt-get download $PACKAGE failed; refreshing the package lists" >&2
      if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
      $SUDO apt-get update -qq
      (cd "$DOWNLOAD" && apt-get download -qq "$PACKAGE")
    fi
    dpkg -x "$DOWNLOAD"/${PACKAGE}_*.deb "$TARGET/deb"
  fi
fi
python "$ROOT/scripts/import_fashion_mnist.py" --idx_dir="$IDX_DIR" --output_dir="$TARGET/cifar"
