#!/usr/bin/env bash
# The main job end to end on built-in data: generate the toy reversal task, train the toy
# Transformer (train_eval), write inference for the test set and print its BLEU.
#
# Usage: bash scripts/run_toy_reversal.sh [WORKDIR] [run.py overrides ...]
#   WORKDIR defaults to the repository root, so that the README's "Using it" commands, run
#   from there, find the data (toy_text_data/, where the config looks) and the trained run
#   (runs/toy_reversal/). Overrides (e.g. --max_steps=50) go to both run.py calls.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$ROOT}
shift || true
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
CONFIG="$ROOT/example_configs/text2text/toy-reversal/nmt-reversal-TT.py"
RUN=runs/toy_reversal
cd "$WORK"
[ -f toy_text_data/test/source.txt ] || python "$ROOT/scripts/create_toy_data.py" --data_dir toy_text_data
CONTINUE=()
[ -f "$RUN/checkpoint" ] && CONTINUE=(--continue_learning)
python "$ROOT/run.py" --config_file="$CONFIG" --mode=train_eval --logdir="$RUN" \
    "${CONTINUE[@]}" "$@"
python "$ROOT/run.py" --config_file="$CONFIG" --mode=infer --logdir="$RUN" \
    --infer_output_file="$RUN/test_predictions.txt" "$@"
echo "predictions: $WORK/$RUN/test_predictions.txt"
