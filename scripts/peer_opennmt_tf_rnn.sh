#!/bin/bash
# Peer baseline for docs/benchmarks.md: OpenNMT-tf 2.32's GNMT-style RNN (the counterpart of
# example_configs/text2text/en-es/gnmt-small-bible.py) trained on the Bible data, printing its
# steady-state training throughput. The RNN companion of ../shared/bench/peer_opennmt_tf.sh
# (the Transformer's), with the same venv, batching and log parsing.
#   Usage: scripts/peer_opennmt_tf_rnn.sh DATADIR [STEPS=60]
# DATADIR is scripts/get_bible_en_es.sh's output (train.sp.{en,es}, spm.vocab). Env: VENV_DIR
# (default /tmp/peer-venvs/onmt; created with tensorflow-cpu 2.13.1, opennmt-tf 2.32.0,
# tensorflow-addons 0.21.0 if missing), RUN_DIR, WARMUP (steps left out of the medians, 10).
# Model, at gnmt-small-bible.py's dimensions: a bidirectional LSTM layer of 512 per direction,
# then one of 512 (GNMT's encoder; residuals would start at the third layer), and OpenNMT-tf's
# AttentionalRNNDecoder with 2 LSTM layers of 512 and normalized Bahdanau attention over the top
# layer, its output fed to the next step's input (Luong's input feeding). GNMT's wiring,
# first_layer_attention=True, cannot train in OpenNMT-tf 2.32 on TF 2.13: its first checkpoint
# save fails ("Unable to save the object ListWrapper ... A list element was replaced").
# Embeddings 512, dropout 0.1, zero bridge, label smoothing 0.1, Adam 1e-3, 4,096-token batches,
# sentences up to 128 pieces, float32.
set -euo pipefail
DATA=$(cd "${1:?usage: $0 DATADIR [STEPS]}" && pwd); STEPS=${2:-60}
VENV_DIR=${VENV_DIR:-/tmp/peer-venvs/onmt}; WARMUP=${WARMUP:-10}; LOG_EVERY=5
RUN_DIR=${RUN_DIR:-$(mkdir -p /tmp/peer-runs && mktemp -d /tmp/peer-runs/onmt-rnn.XXXX)}
mkdir -p "$RUN_DIR"
if [ ! -x "$VENV_DIR/bin/onmt-main" ]; then
  python3 -m venv "$VENV_DIR"
  "$VENV_DIR/bin/pip" install -q tensorflow-cpu==2.13.1 opennmt-tf==2.32.0 tensorflow-addons==0.21.0
fi
# OpenNMT-tf reads one token per vocabulary line: the SentencePiece pieces, in id order
cut -f1 "$DATA/spm.vocab" > "$RUN_DIR/vocab.txt"

cat > "$RUN_DIR/model.py" <<'PY'
import functools
import opennmt
import tensorflow_addons as tfa
def model():
    return opennmt.models.SequenceToSequence(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size=512),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size=512),
        # GNMT's first two layers as gnmt-small-bible.py has them: 512 per direction, then
        # 512 left-to-right (GNMTEncoder would add a residual that GNMT starts at layer 3)
        encoder=opennmt.encoders.SequentialEncoder([
            opennmt.encoders.LSTMEncoder(1, 512, bidirectional=True, dropout=0.1),
            opennmt.encoders.LSTMEncoder(1, 512, dropout=0.1)]),
        decoder=opennmt.decoders.AttentionalRNNDecoder(
            num_layers=2, num_units=512, bridge_class=opennmt.layers.ZeroBridge,
            attention_mechanism_class=functools.partial(tfa.seq2seq.BahdanauAttention,
                                                        normalize=True),
            dropout=0.1))
PY
cat > "$RUN_DIR/config.yml" <<YML
model_dir: $RUN_DIR/model
data:
  train_features_file: $DATA/train.sp.en
  train_labels_file: $DATA/train.sp.es
  source_vocabulary: $RUN_DIR/vocab.txt
  target_vocabulary: $RUN_DIR/vocab.txt
params:
  optimizer: Adam
  learning_rate: 0.001
  label_smoothing: 0.1
train:
  batch_size: 4096
  batch_type: tokens
  maximum_features_length: 128
  maximum_labels_length: 128
  max_step: $STEPS
  save_summary_steps: $LOG_EVERY
  save_checkpoints_steps: 1000000
  keep_checkpoint_max: 1
YML

echo "run dir: $RUN_DIR"
"$VENV_DIR/bin/onmt-main" --model "$RUN_DIR/model.py" --config "$RUN_DIR/config.yml" train \
  > "$RUN_DIR/train.log" 2>&1 || { tail -30 "$RUN_DIR/train.log"; exit 1; }
rm -rf "$RUN_DIR/model"

# "<date> <time>: I ...] Step = N ; steps/s = X, tokens/s = T (S source, G target) ; ..."
# OpenNMT-tf's own token counts (padding excluded); step times from the timestamps.
python3 - "$RUN_DIR/train.log" "$WARMUP" <<'PY'
import re, statistics, sys
from datetime import datetime
log, warmup = open(sys.argv[1]).read(), int(sys.argv[2])
params = re.search(r"Number of model parameters: (\d+)", log).group(1)
points = [(datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f"), int(n), int(tok)) for t, n, tok in
          re.findall(r"(\S+ \S+): I \S+\] Step = (\d+) ; steps/s = [\d.]+, tokens/s = (\d+)", log)]
steady = [((n1 - n0) / (t1 - t0).total_seconds(), tok)
          for (t0, n0, _), (t1, n1, tok) in zip(points, points[1:]) if n0 >= warmup]
if not steady:
    sys.exit("no interval after the warm-up; raise STEPS or lower WARMUP")
steps_per_s = statistics.median(r[0] for r in steady)
print("opennmt-tf rnn: s_per_step=%.3f tokens_per_s=%.0f params=%s intervals=%d"
      % (1 / steps_per_s, statistics.median(r[1] for r in steady), params, len(steady)))
PY
