#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine (idempotent): the package with
# its test extras, and the Debian packages the speech tests use (speech synthesis for the
# synthetic corpus, real recordings for the real-speech check, the Asterisk prompts for the
# speech-synthesis corpus), and Open MPI + Horovod so the
# Horovod tests really run (see scripts/install_horovod.sh; skipped when already installed),
# and Fashion-MNIST for the image learning test (scripts/get_fashion_mnist.sh), and the
# novels and tweets of the language-model family (scripts/get_lm_data.sh), and the
# English-Spanish Bible of the translation recipe (scripts/get_bible_en_es.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
APT_PACKAGES="espeak-ng flite pocketsphinx-testdata asterisk-core-sounds-en-wav asterisk-core-sounds-en"
if ! dpkg -s $APT_PACKAGES >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $APT_PACKAGES >/dev/null
fi
pip install -q -e "$ROOT[test]"
# In-graph SentencePiece for exported translation models (--mode=export): tensorflow-text
# must match TensorFlow's minor version and requires the full tensorflow wheel, which
# tensorflow-cpu already provides the libraries of, so it goes in without its pins too.
TF_MINOR=$(python -c "import tensorflow as tf; print('.'.join(tf.__version__.split('.')[:2]))" 2>/dev/null)
pip install -q --no-deps "tensorflow-text==${TF_MINOR}.*"
# Independent reference of the RNN-T loss tests (tests/unit/test_rnnt_loss.py): PaddlePaddle's
# CPU wheel, warp-transducer inside (195 MB, no CUDA); without its pins (opt_einsum==3.3.0 would
# downgrade TensorFlow's), its other imports (httpx, safetensors) installed first.
pip install -q httpx safetensors && pip install -q --no-deps paddlepaddle==3.3.1
bash "$ROOT/scripts/get_fashion_mnist.sh"  # real images for the image-classification learning test
bash "$ROOT/scripts/get_lm_data.sh"  # English novels + sentiment tweets for the LM family's tests
bash "$ROOT/scripts/get_bible_en_es.sh"  # English-Spanish Bible for the translation recipe's test
bash "$ROOT/scripts/install_horovod.sh"
