#!/bin/bash
# Peer baseline for docs/benchmarks.md: OpenNMT-tf 2.32's beam search on the Bible Transformer,
# the counterpart of `scripts/benchmark_translation.py --models bible --infer_only`. Trains the
# model of ../shared/bench/peer_opennmt_tf.sh (d_model 512, 8 heads, FFN 2048, 2+2 layers,
# pre-norm, per-side vocabularies) for STEPS steps into a checkpoint, then translates the first
# SENTENCES test verses with beam 4, length penalty 0.6 (OpenNMT-tf's is GNMT's, as ours) and
# MIN_LENGTH to MAX_LENGTH pieces per hypothesis, 64 sentences per batch in file order, and
# prints sentences/s after the first batch (which includes tracing) and the mean hypothesis
# length. A briefly trained OpenNMT-tf model never ends a hypothesis by itself (it runs to
# MAX_LENGTH, 250 by default): to time it on the lengths our briefly trained model produces,
# set MAX_LENGTH to their mean (benchmark_translation.py prints it).
#   Usage: scripts/peer_opennmt_tf_beam.sh DATADIR [SENTENCES=256] [MIN_LENGTH=32] [STEPS=1]
#          [MAX_LENGTH=250]
# DATADIR is ../shared/bench/get_bible_en_es.sh's output (train.sp.{en,es}, test.sp.en,
# vocab.{en,es}). Env: VENV_DIR (default /tmp/peer-venvs/onmt; created with tensorflow-cpu
# 2.13.1, opennmt-tf 2.32.0, tensorflow-addons 0.21.0 if missing), RUN_DIR, and
# LENGTH_BUCKET_WIDTH: batch sentences of similar length (OpenNMT-tf's
# infer/length_bucket_width; unset: file order), the counterpart of our
# data_layer_params/bucket_width at inference.
set -euo pipefail
DATA=$(cd "${1:?usage: $0 DATADIR [SENTENCES] [MIN_LENGTH] [STEPS] [MAX_LENGTH]}" && pwd)
SENTENCES=${2:-256}; MIN_LENGTH=${3:-32}; STEPS=${4:-1}; MAX_LENGTH=${5:-250}
VENV_DIR=${VENV_DIR:-/tmp/peer-venvs/onmt}
RUN_DIR=${RUN_DIR:-$(mkdir -p /tmp/peer-runs && mktemp -d /tmp/peer-runs/onmt-beam.XXXX)}
mkdir -p "$RUN_DIR"
if [ ! -x "$VENV_DIR/bin/onmt-main" ]; then
  python3 -m venv "$VENV_DIR"
  "$VENV_DIR/bin/pip" install -q tensorflow-cpu==2.13.1 opennmt-tf==2.32.0 tensorflow-addons==0.21.0
fi
head -n "$SENTENCES" "$DATA/test.sp.en" > "$RUN_DIR/source.sp.en"

cat > "$RUN_DIR/model.py" <<'PY'
import opennmt
def model():
    return opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size=512),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size=512),
        num_layers=2, num_units=512, num_heads=8, ffn_inner_dim=2048,
        dropout=0.1, attention_dropout=0.1, ffn_dropout=0.1,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.NONE)
PY
cat > "$RUN_DIR/config.yml" <<YML
model_dir: $RUN_DIR/model
data:
  train_features_file: $DATA/train.sp.en
  train_labels_file: $DATA/train.sp.es
  source_vocabulary: $DATA/vocab.en
  target_vocabulary: $DATA/vocab.es
params:
  optimizer: Adam
  optimizer_params: {beta_1: 0.9, beta_2: 0.998, epsilon: 1.0e-8}
  learning_rate: 0.0005
  decay_type: InvSqrtDecay
  decay_params: {warmup_steps: 400}
  label_smoothing: 0.1
  beam_width: 4
  length_penalty: 0.6
  minimum_decoding_length: $MIN_LENGTH
  maximum_decoding_length: $MAX_LENGTH
train:
  batch_size: 4096
  batch_type: tokens
  max_step: $STEPS
  save_checkpoints_steps: 1000000
  keep_checkpoint_max: 1
infer:
  batch_size: 64
  batch_type: examples
YML
if [ -n "${LENGTH_BUCKET_WIDTH:-}" ]; then
  echo "  length_bucket_width: $LENGTH_BUCKET_WIDTH" >> "$RUN_DIR/config.yml"
fi
"$VENV_DIR/bin/onmt-main" --model "$RUN_DIR/model.py" --config "$RUN_DIR/config.yml" train \
  > "$RUN_DIR/train.log" 2>&1 || { tail -30 "$RUN_DIR/train.log"; exit 1; }

# OpenNMT-tf's own --log_prediction_time counts the first batch (tracing) in: time every
# batch as it comes out instead (inference.predict_dataset calls extract_batches once per
# batch, after the batch's beam search has finished).
"$VENV_DIR/bin/python" - "$RUN_DIR" <<'PY' 2> "$RUN_DIR/infer.log"
import sys, time
import opennmt
from opennmt.utils import misc
run = sys.argv[1]
stamps = []
extract = misc.extract_batches
def timed(predictions):
    stamps.append((time.time(), len(next(iter(predictions.values())))))
    return extract(predictions)
misc.extract_batches = timed
config = opennmt.config.load_config([f"{run}/config.yml"])
model = opennmt.config.load_model(f"{run}/model", model_file=f"{run}/model.py")
opennmt.Runner(model, config).infer(f"{run}/source.sp.en", predictions_file=f"{run}/hyp.sp.es")
lengths = [len(line.split()) for line in open(f"{run}/hyp.sp.es", encoding="utf-8")]
after_first = sum(n for _, n in stamps[1:])
seconds = stamps[-1][0] - stamps[0][0]
print("opennmt-tf beam: batches=%d sentences=%d sentences_per_s_after_first_batch=%.2f "
      "mean_length=%.1f" % (len(stamps), len(lengths), after_first / seconds,
                            sum(lengths) / len(lengths)))
PY
