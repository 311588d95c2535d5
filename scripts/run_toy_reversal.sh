#!/usr/bin/env bash
# The main job end to end on built-in data: generate the toy reversal task, train the toy
# Transformer (train_eval), write inference for the test set and print its BLEU.
# Usage: bash scripts/run_toy_reversal.sh [WORKDIR=toy_reversal_run]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-toy_reversal_run}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
CONFIG="$ROOT/example_configs/text2text/toy-reversal/nmt-reversal-TT.py"
cd "$WORK"
[ -f toy_text_data/test/source.txt ] || python "$ROOT/scripts/create_toy_data.py" --data_dir toy_text_data
CONTINUE=()
[ -f logdir/checkpoint ] && CONTINUE=(--continue_learning)
python "$ROOT/run.py" --config_file="$CONFIG" --mode=train_eval --logdir=logdir "${CONTINUE[@]}"
python "$ROOT/run.py" --config_file="$CONFIG" --mode=infer --logdir=logdir \
    --infer_output_file=test_predictions.txt
echo "predictions: $WORK/test_predictions.txt"
