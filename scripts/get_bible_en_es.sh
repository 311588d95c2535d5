#!/usr/bin/env bash
# Builds the English-Spanish Bible corpus of example_configs/text2text/en-es/ (idempotent:
# finished steps are skipped, a complete folder is left as it is):
#
#   bash scripts/get_bible_en_es.sh [OUT]      # default: data/bible_en_es
#
# Sources: the World English Bible and the Reina-Valera 1909 (both public domain), from
# Debian's SWORD modules sword-text-web and sword-text-sparv, exported with mod2imp
# (libsword-utils); the packages are installed with apt-get if missing (sudo when not root).
# scripts/import_bible.py aligns the verses, drops repeated pairs and splits them
# deterministically (1000 test, 1000 dev, the rest train); scripts/build_sentencepiece.py
# trains a joint BPE model of 8000 pieces on train (both languages). OUT then holds:
#
#   {train,dev,test}.{en,es}     raw verses, one per line (what the example config reads)
#   {train,dev,test}.keys        their verse keys ("Genesis 1:1")
#   spm.model, spm.vocab         the SentencePiece model and its vocabulary file (ids 4..)
#   {train,dev,test}.sp.{en,es}  the verses as space-separated pieces
#   spm.en.vocab, spm.es.vocab   per-side vocabulary files: the pieces train.en (train.es)
#                                uses, most frequent first (the example configs' vocabularies)
#
# OUT/.gitignore keeps the corpus out of git.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/data/bible_en_es}
PYTHON=${PYTHON:-python}
PACKAGES="sword-text-web sword-text-sparv libsword-utils"
SPLITS="train dev test"
VOCAB_SIZE=8000

RAW=""
ENCODED=""
for split in $SPLITS; do
  RAW="$RAW $split.en $split.es $split.keys"
  ENCODED="$ENCODED $split.sp.en $split.sp.es"
done
all_present() {  # every named file exists in OUT (each is written whole, then renamed)
  local name
  for name in "$@"; do
    [ -f "$OUT/$name" ] || return 1
  done
}

if all_present $RAW spm.model spm.vocab spm.en.vocab spm.es.vocab $ENCODED; then
  echo "Bible en-es corpus already complete in $OUT"
  exit 0
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -f "$OUT/.gitignore" ] || printf '*\n!.gitignore\n' > "$OUT/.gitignore"

if ! all_present $RAW; then
  if ! dpkg -s $PACKAGES >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $PACKAGES >/dev/null
  fi
  EXPORTS=$(mktemp -d)
  trap 'rm -rf "$EXPORTS"' EXIT
  # Without -s: mod2imp's stripped output glues the words on either side of a footnote.
  mod2imp engWEB2015eb > "$EXPORTS/en.imp"
  mod2imp spaRV1909eb > "$EXPORTS/es.imp"
  "$PYTHON" "$ROOT/scripts/import_bible.py" --en_imp "$EXPORTS/en.imp" \
    --es_imp "$EXPORTS/es.imp" --out "$OUT" --test_size 1000 --dev_size 1000
  rm -f "$OUT/spm.model" "$OUT/spm.vocab" "$OUT"/spm.??.vocab  # stale: an older train split
  for name in $ENCODED; do rm -f "$OUT/$name"; done
fi

ENCODE=()
for split in $SPLITS; do
  for lang in en es; do
    ENCODE+=(--encode "$OUT/$split.$lang" "$OUT/$split.sp.$lang")
  done
done
for lang in en es; do
  ENCODE+=(--side_vocab "$OUT/train.$lang" "$OUT/spm.$lang.vocab")
done
if [ ! -f "$OUT/spm.model" ]; then
  "$PYTHON" "$ROOT/scripts/build_sentencepiece.py" --input "$OUT/train.en" \
    --input "$OUT/train.es" --model_prefix "$OUT/spm" --vocab_size "$VOCAB_SIZE" \
    --model_type bpe --character_coverage 1.0 --seed 0 "${ENCODE[@]}"
else  # the model is there: (re)write its vocabulary file and the encoded splits
  "$PYTHON" "$ROOT/scripts/build_sentencepiece.py" --model "$OUT/spm.model" \
    --vocab_file "$OUT/spm.vocab" "${ENCODE[@]}"
fi
echo "Bible en-es corpus complete in $OUT"
