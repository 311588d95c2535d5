#!/bin/bash
# Translation quality beside the peers: the same Transformer (d_model 256, 4 heads, FFN 1024,
# 3+3 layers, pre-norm, dropout 0.1, label smoothing 0.1, Adam(0.9, 0.998, 1e-8), inverse-sqrt
# schedule peaking at 5e-4 after 400 warm-up steps, ~4,096 tokens per side per batch, separate
# embeddings, float32) trained STEPS steps by open_seq2seq, OpenNMT-tf 2.32 and fairseq 0.12.2 on
# the Bible en-es data; then each toolkit's beam search (beam 4, its own default length
# penalty) on the 1,000 test verses, SentencePiece decoding and sacreBLEU against raw test.es.
#
#   bash scripts/peer_quality.sh DATADIR STEPS [WORKDIR=/tmp/quality]
#
# DATADIR: the folder of scripts/get_bible_en_es.sh: raw {train,dev,test}.{en,es}, spm.model, the
# pieces *.sp.{en,es} and the per-side vocabularies spm.{en,es}.vocab, which the peers read too
# (written to WORKDIR/vocab.{en,es} in OpenNMT-tf's layout: <blank> <s> </s>, then the pieces).
# Env: TOOLKITS (default "ours onmt fairseq"), CHUNK (steps per training chunk, default 500:
# training runs in chunks, each under the CPU lock, and resumes from its last checkpoint, so a
# killed run or a larger STEPS continues where it stopped), LOCK (flock file, default
# /tmp/oss2s-cpu.lock; empty: no lock), VENVS (default /tmp/peer-venvs: the peers' virtual
# environments, created here when missing), PYTHON (open_seq2seq's interpreter, default python).
# Writes WORKDIR/{ours,onmt,fairseq}/ (checkpoints, logs, hyp.txt,
# bleu.json, train_times and infer_times: each locked run's start and end) and
# prints one Markdown row per toolkit: steps, training wall time (the chunks' sum, process
# start-up included), parameters, test BLEU with sacreBLEU's signature.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DATA=$(cd "${1:?usage: $0 DATADIR STEPS [WORKDIR]}" && pwd); STEPS=${2:?usage: $0 DATADIR STEPS [WORKDIR]}
W=${3:-/tmp/quality}; mkdir -p "$W"; W=$(cd "$W" && pwd)
TOOLKITS=${TOOLKITS:-ours onmt fairseq}; CHUNK=${CHUNK:-500}; LOCK=${LOCK-/tmp/oss2s-cpu.lock}
VENVS=${VENVS:-/tmp/peer-venvs}; PYTHON=${PYTHON:-python}
export BIBLE_DATA=$DATA   # our config reads the data folder from it
for f in train.en test.en test.es spm.model spm.en.vocab spm.es.vocab train.sp.en train.sp.es \
         dev.sp.en dev.sp.es test.sp.en; do
  [ -f "$DATA/$f" ] || { echo "error: $DATA/$f is missing (see the header of $0)" >&2; exit 2; }
done
case $REPO/ in "$W"/*) echo "error: WORKDIR $W must be outside the repository" >&2; exit 2;; esac
# the peers' vocabularies: our per-side ones, same pieces in the same order
for l in en es; do
  { printf '<blank>\n<s>\n</s>\n'; cut -f1 "$DATA/spm.$l.vocab"; } > "$W/vocab.$l"
done

# locked FILE CMD...: run CMD under the CPU lock; append its start and end time (the lock's
# wait excluded) to FILE.
locked() {
  local times=$1; shift
  local lock=(); [ -z "$LOCK" ] || lock=(flock "$LOCK")
  "${lock[@]}" bash -c 's=$(date +%s.%N); "${@:2}"; rc=$?; e=$(date +%s.%N)
    echo "$s $e" >> "$1"; exit $rc' _ "$times" "$@"
}
seconds() { awk '{t += $2 - $1} END {printf "%.0f", t}' "$1/train_times"; }
chunks_to() {  # done target: the next chunk's end step
  local next=$(( $1 + CHUNK )); [ $next -lt "$2" ] || next=$2; echo $next; }

# BLEU of $1/hyp.txt (detokenized, one line per test verse) against raw test.es
score() {
  "$PYTHON" - "$1/hyp.txt" "$DATA/test.es" "$1/bleu.json" <<'PY'
import json, sys
import sacrebleu
hyp = open(sys.argv[1], encoding="utf-8").read().splitlines()
ref = open(sys.argv[2], encoding="utf-8").read().splitlines()
if len(hyp) != len(ref):
  sys.exit(f"error: {sys.argv[1]} has {len(hyp)} lines, {sys.argv[2]} {len(ref)}")
bleu = sacrebleu.metrics.BLEU()
result = bleu.corpus_score(hyp, [ref])
json.dump({"bleu": result.score, "text": str(result), "signature": str(bleu.get_signature())},
          open(sys.argv[3], "w"))
PY
}
# SentencePiece pieces (one sentence a line) -> text
spm_decode() {
  "$PYTHON" - "$DATA/spm.model" "$1" "$2" <<'PY'
import sys
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f, open(sys.argv[3], "w", encoding="utf-8") as out:
  out.writelines(sp.decode_pieces(line.split()) + "\n" for line in f)
PY
}

# ---------------------------------------------------------------- open_seq2seq
OURS_CONFIG=$REPO/example_configs/text2text/en-es/transformer-3x3-bible-d256.py
ours() {
  local D=$W/ours; mkdir -p "$D"
  local run=("$PYTHON" "$REPO/run.py" "--config_file=$OURS_CONFIG" "--logdir=$D/run")
  local done=0
  [ -f "$D/done_steps" ] && done=$(cat "$D/done_steps")
  while [ "$done" -lt "$STEPS" ]; do
    local next; next=$(chunks_to "$done" "$STEPS")
    locked "$D/train_times" "${run[@]}" --mode=train --continue_learning --max_steps="$next" \
      --save_checkpoint_steps="$CHUNK" --print_samples_steps=None >> "$D/train.log" 2>&1 \
      || { tail -5 "$D/train.log"; exit 1; }
    done=$next; echo "$done" > "$D/done_steps"
  done
  if [ ! -s "$D/hyp.txt" ]; then
    rm -f "$D/hyp.tmp"
    locked "$D/infer_times" "${run[@]}" --mode=infer --infer_output_file="$D/hyp.tmp" \
      --batch_size_per_gpu=32 > "$D/infer.log" 2>&1 || { tail -5 "$D/infer.log"; exit 1; }
    mv "$D/hyp.tmp" "$D/hyp.txt"
  fi
  grep -o 'Training [0-9,]* parameters' "$D/train.log" | head -1 | tr -dc 0-9 > "$D/params"
}

# ---------------------------------------------------------------- OpenNMT-tf
onmt() {
  local D=$W/onmt V=$VENVS/onmt; mkdir -p "$D"
  onmt_setup "$D"
  local done=0
  [ -f "$D/done_steps" ] && done=$(cat "$D/done_steps")
  while [ "$done" -lt "$STEPS" ]; do
    local next; next=$(chunks_to "$done" "$STEPS")
    onmt_config "$D/model" "$next" 100 "$CHUNK" > "$D/config.yml"
    # no --auto_config (it would accumulate gradients to ~25k tokens); it resumes from model_dir
    locked "$D/train_times" "$V/bin/onmt-main" --model "$D/model.py" --config "$D/config.yml" train \
      >> "$D/train.log" 2>&1 || { tail -5 "$D/train.log"; exit 1; }
    done=$next; echo "$done" > "$D/done_steps"
  done
  if [ ! -s "$D/hyp.txt" ]; then
    locked "$D/infer_times" "$V/bin/onmt-main" --model "$D/model.py" --config "$D/config.yml" infer \
      --features_file "$DATA/test.sp.en" --predictions_file "$D/hyp.sp" > "$D/infer.log" 2>&1 \
      || { tail -5 "$D/infer.log"; exit 1; }
    spm_decode "$D/hyp.sp" "$D/hyp.txt"
  fi
  grep -o 'Number of model parameters: [0-9]*' "$D/train.log" | head -1 | tr -dc 0-9 > "$D/params"
}
onmt_setup() {  # DIR: the venv (created when missing) and DIR/model.py
  local V=$VENVS/onmt
  if [ ! -x "$V/bin/onmt-main" ]; then                       # pins verified on Python 3.11
    python3 -m venv "$V"
    "$V/bin/pip" install -q tensorflow-cpu==2.13.1 opennmt-tf==2.32.0 tensorflow-addons==0.21.0
  fi
  cat > "$1/model.py" <<'PY'
import opennmt
def model():
  return opennmt.models.Transformer(
      source_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
      target_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
      num_layers=3, num_units=256, num_heads=4, ffn_inner_dim=1024,
      dropout=0.1, attention_dropout=0.1, ffn_dropout=0.1,
      share_embeddings=opennmt.models.EmbeddingsSharingLevel.NONE)
PY
}
onmt_config() {  # MODEL_DIR MAX_STEP LOG_EVERY SAVE_EVERY
  cat <<YML
model_dir: $1
data:
  train_features_file: $DATA/train.sp.en
  train_labels_file: $DATA/train.sp.es
  source_vocabulary: $W/vocab.en
  target_vocabulary: $W/vocab.es
params:
  optimizer: Adam
  optimizer_params: {beta_1: 0.9, beta_2: 0.998, epsilon: 1.0e-8}
  learning_rate: 0.0005
  decay_type: InvSqrtDecay
  decay_params: {warmup_steps: 400}
  label_smoothing: 0.1
  beam_width: 4
train:
  batch_size: 4096
  batch_type: tokens
  max_step: $2
  save_summary_steps: $3
  save_checkpoints_steps: $4
  keep_checkpoint_max: 2
infer:
  batch_size: 32
YML
}

# ---------------------------------------------------------------- fairseq
# the model, loss and optimizer of every fairseq run
FAIRSEQ_MODEL=(--task translation -s en -t es
  --arch transformer --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256
  --decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
  --encoder-attention-heads 4 --decoder-attention-heads 4
  --encoder-normalize-before --decoder-normalize-before
  --dropout 0.1 --attention-dropout 0.1 --activation-dropout 0.1 --label-smoothing 0.1
  --optimizer adam --adam-betas '(0.9, 0.998)' --adam-eps 1e-8 --lr 5e-4
  --lr-scheduler inverse_sqrt --warmup-updates 400 --warmup-init-lr 0
  --max-tokens 4096 --required-batch-size-multiple 1 --seed 1 --cpu --num-workers 0
  --disable-validation)
fairseq() {
  local D=$W/fairseq V=$VENVS/fairseq; mkdir -p "$D"
  fairseq_setup "$D"
  local done=0
  [ -f "$D/done_steps" ] && done=$(cat "$D/done_steps")
  while [ "$done" -lt "$STEPS" ]; do
    local next; next=$(chunks_to "$done" "$STEPS")
    # resumes from checkpoint_last.pt (model, optimizer, schedule, data position)
    locked "$D/train_times" "$V/bin/fairseq-train" "$D/bin" "${FAIRSEQ_MODEL[@]}" \
      --criterion label_smoothed_cross_entropy --max-update "$next" --no-epoch-checkpoints \
      --save-dir "$D/ckpt" --log-format simple --log-interval 100 >> "$D/train.log" 2>&1 \
      || { tail -5 "$D/train.log"; exit 1; }
    done=$next; echo "$done" > "$D/done_steps"
  done
  if [ ! -s "$D/hyp.txt" ]; then
    locked "$D/infer_times" "$V/bin/fairseq-generate" "$D/bin" --task translation -s en -t es \
      --gen-subset test --path "$D/ckpt/checkpoint_last.pt" --beam 4 --batch-size 32 --cpu \
      > "$D/generate.log" 2> "$D/generate.err" || { tail -5 "$D/generate.err"; exit 1; }
    # H-<id>\t<score>\t<pieces>, in batch order: back to file order
    grep '^H-' "$D/generate.log" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$D/hyp.sp"
    spm_decode "$D/hyp.sp" "$D/hyp.txt"
  fi
  # parameters the model uses: fairseq 0.12.2 also allocates unused BetterTransformer copies
  # (in_proj_*, out_proj_*, fc1_*, fc2_* directly on each encoder layer)
  "$V/bin/python" - "$D/ckpt/checkpoint_last.pt" > "$D/params" <<'PY'
import re, sys, torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=False)["model"]
unused = re.compile(r"encoder\.layers\.\d+\.(in_proj|out_proj|fc1|fc2)_(weight|bias)$")
print(sum(v.numel() for k, v in state.items()
          if not unused.search(k) and not k.endswith(("_float_tensor", ".version"))), end="")
PY
}
fairseq_setup() {  # DIR: the venv (installed when missing) and the binarized data in DIR/bin
  local D=$1 V=$VENVS/fairseq
  [ -x "$V/bin/fairseq-train" ] || install_fairseq "$V"
  export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1   # torch>=2.6 loads weights only by default
  if [ ! -f "$D/bin/test.en-es.es.bin" ]; then
    # fairseq dictionaries from the OpenNMT-tf vocab files (drop <blank> <s> </s>)
    for l in en es; do tail -n +4 "$W/vocab.$l" | awk '{print $0" 1"}' > "$D/dict.$l.txt"; done
    locked "$D/preprocess_times" "$V/bin/fairseq-preprocess" -s en -t es --trainpref "$DATA/train.sp" \
      --validpref "$DATA/dev.sp" --testpref "$DATA/test.sp" --srcdict "$D/dict.en.txt" \
      --tgtdict "$D/dict.es.txt" --destdir "$D/bin" --workers 2 > "$D/preprocess.log" 2>&1
  fi
}
install_fairseq() {  # fairseq 0.12.2's sdist, patched for Python 3.11 / torch 2.13 / hydra 1.3
  local V=$1 SRC; python3 -m venv "$V"
  "$V/bin/pip" install -q torch==2.13.0 numpy==1.26.4 cython==3.3.1
  SRC=$(mktemp -d)
  (cd "$SRC" && "$V/bin/pip" download -q --no-deps --no-build-isolation --no-binary fairseq \
     fairseq==0.12.2 && tar xzf fairseq-0.12.2.tar.gz)
  (cd "$SRC/fairseq-0.12.2" && python3 - <<'PY'
import pathlib, re
# (1) drop the C++ extensions whose sources the sdist lacks (libbase, libnat, alignment_train_cpu)
s = pathlib.Path("setup.py").read_text()
s = s.replace("""    extensions.extend(
        [
            cpp_extension.CppExtension(
                "fairseq.libbase",
                sources=[
                    "fairseq/clib/libbase/balanced_assignment.cpp",
                ],
            )
        ]
    )
""", "")
s = s.replace('"hydra-core>=1.0.7,<1.1"', '"hydra-core>=1.3,<1.4"').replace(
    '"omegaconf<2.1"', '"omegaconf>=2.3,<2.4"').replace('"torchaudio>=0.8.0",', "")
i = s.find('            cpp_extension.CppExtension(\n                "fairseq.libnat",')
if i != -1:
  i = s.rfind("    extensions.extend(", 0, i); s = s[:i] + s[s.find('    if "CUDA_HOME" in os.environ:'):]
pathlib.Path("setup.py").write_text(s)
# (2) Python >= 3.11 refuses mutable dataclass defaults: use default_factory
for p in pathlib.Path("fairseq").rglob("*.py"):
  t = p.read_text()
  u = re.sub(r"(?m)^(\s+\w+): (\w+) = \2\(\)\s*$", r"\1: \2 = field(default_factory=\2)", t)
  u = re.sub(r"field\(\s*default=(\w+)\(\)", r"field(default_factory=\1", u)
  if u != t:
    if not re.search(r"from dataclasses import[^\n]*\bfield\b", u):
      u = "from dataclasses import field\n" + u
    p.write_text(u)
# (3) hydra_init reads .default, which default_factory fields no longer have
p = pathlib.Path("fairseq/dataclass/initialize.py"); t = p.read_text()
t = t.replace("        v = FairseqConfig.__dataclass_fields__[k].default\n",
              "        _f = FairseqConfig.__dataclass_fields__[k]\n        v = _f.default_factory() "
              "if _f.default_factory is not dataclasses.MISSING else _f.default\n")
p.write_text("import dataclasses\n" + t)
# (4) the BetterTransformer inference path fails on torch 2.13 ('Mask Type should be defined')
for f in ("fairseq/modules/transformer_layer.py", "fairseq/models/transformer/transformer_encoder.py"):
  p = pathlib.Path(f); p.write_text(p.read_text().replace("BT_version = True", "BT_version = False"))
PY
  )
  # --no-build-isolation: else pip builds the sdist's build requirements (numpy, torch) from source
  "$V/bin/pip" install -q --no-build-isolation "$SRC/fairseq-0.12.2" hydra-core==1.3.8 \
    omegaconf==2.3.1 bitarray==3.12.3
  rm -rf "$SRC"
}

NAMES=(ours=open_seq2seq onmt="OpenNMT-tf 2.32" fairseq="fairseq 0.12.2")
name_of() { local n; for n in "${NAMES[@]}"; do [ "${n%%=*}" != "$1" ] || echo "${n#*=}"; done; }

for t in $TOOLKITS; do
  case $t in ours|onmt|fairseq) ;;
    *) echo "error: TOOLKITS: unknown toolkit $t (ours, onmt, fairseq)" >&2; exit 2;; esac
done
CPU="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
for t in $TOOLKITS; do "$t"; score "$W/$t"; done
echo "CPU: $CPU; $STEPS steps; beam 4 on $(wc -l < "$DATA/test.en") test verses"
echo "| toolkit | steps | training wall time (min) | parameters | test BLEU |"
echo "|---|---:|---:|---:|---:|"
for t in $TOOLKITS; do
  "$PYTHON" - "$W/$t" "$(name_of "$t")" "$(cat "$W/$t/done_steps")" "$(seconds "$W/$t")" \
    "$(cat "$W/$t/params")" <<'PY'
import json, sys
d, name, steps, secs, params = sys.argv[1:]
b = json.load(open(f"{d}/bleu.json"))
print(f"| {name} | {steps} | {int(secs) / 60:.1f} | {int(params):,} | {b['bleu']:.1f} |")
PY
done
echo "sacreBLEU signature: $("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["signature"])' "$W/${TOOLKITS%% *}/bleu.json")"
