#!/usr/bin/env bash
# download_wikitext.sh - fetch WikiText-2 and/or WikiText-103 (word level, the official
# "-v1" archives wikitext-2-v1.zip / wikitext-103-v1.zip, with <unk>) and check them.
#
#   scripts/download_wikitext.sh [2|103|all] [DEST]      (defaults: 2, data)
#
# Result: DEST/wikitext-2/wiki.{train,valid,test}.tokens (and/or DEST/wikitext-103/...),
# which `stretch data --source wikitext --path DEST/wikitext-2` reads directly.
#
# Checks:
#   - the archive's sha256 when you pin it (WIKITEXT2_ZIP_SHA256 / WIKITEXT103_ZIP_SHA256);
#     otherwise it is printed so you can pin it;
#   - the extracted WikiText-2 files against the sha256 in shared/data/README.md (the same
#     bytes as pytorch/examples word_language_model/data/wikitext-2/*.txt); a mismatch
#     fails. WikiText-103's extracted files have no pinned hashes here: their sha256 are
#     written to DEST/wikitext-103/SHA256SUMS, and `stretch data` prints the token counts
#     to compare with the published ones (train 103,227,021; valid 217,646; test 245,569).
# Needs curl or wget, unzip, and sha256sum (or shasum). Nothing is overwritten that
# already verifies.
set -euo pipefail

# Official host (the original S3 bucket, https://s3.amazonaws.com/research.metamind.io/wikitext,
# is another mirror with the same file names).
WIKITEXT_MIRROR=${WIKITEXT_MIRROR:-https://wikitext.smerity.com}
WIKITEXT2_ZIP_SHA256=${WIKITEXT2_ZIP_SHA256:-}
WIKITEXT103_ZIP_SHA256=${WIKITEXT103_ZIP_SHA256:-}

# sha256 of the extracted WikiText-2 files (shared/data/README.md)
WT2_TRAIN_SHA256=9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f
WT2_VALID_SHA256=f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8
WT2_TEST_SHA256=d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0

die() { echo "download_wikitext.sh: $*" >&2; exit 1; }

which_set=${1:-2}
dest=${2:-data}
case "$which_set" in
  2|103|all) ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown set '$which_set' (use 2, 103 or all)" ;;
esac

# ---- tools: refuse clearly before touching the network ----
if command -v curl >/dev/null 2>&1; then
  fetch() { curl -fL --retry 3 --connect-timeout 30 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget -q --tries=3 --timeout=30 -O "$2" "$1"; }
else
  die "neither curl nor wget is installed; install one of them (e.g. apt-get install curl)"
fi
command -v unzip >/dev/null 2>&1 || die "unzip is not installed (e.g. apt-get install unzip)"
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  die "neither sha256sum nor shasum is installed (coreutils / perl)"
fi

# verify_wt2 DIR: 0 when all three files match the pinned hashes
verify_wt2() {
  local d=$1 ok=0 f want got
  for f in train valid test; do
    case $f in
      train) want=$WT2_TRAIN_SHA256 ;;
      valid) want=$WT2_VALID_SHA256 ;;
      test) want=$WT2_TEST_SHA256 ;;
    esac
    [ -f "$d/wiki.$f.tokens" ] || { ok=1; continue; }
    got=$(sha256 "$d/wiki.$f.tokens")
    if [ "$got" != "$want" ]; then
      echo "  $d/wiki.$f.tokens: sha256 $got, expected $want" >&2
      ok=1
    fi
  done
  return $ok
}

# get NAME (wikitext-2 | wikitext-103) PINNED_ZIP_SHA256
get() {
  local name=$1 pin=$2 zip url got tmp var
  local out="$dest/$name"
  if [ "$name" = wikitext-2 ] && [ -d "$out" ] && verify_wt2 "$out" 2>/dev/null; then
    echo "$out: already present and verified"
    return 0
  fi
  mkdir -p "$dest"
  zip="$dest/$name-v1.zip"
  url="$WIKITEXT_MIRROR/$name-v1.zip"
  echo "downloading $url"
  fetch "$url" "$zip.part" || { rm -f "$zip.part"; die "download of $url failed (set WIKITEXT_MIRROR to another mirror?)"; }
  mv "$zip.part" "$zip"
  got=$(sha256 "$zip")
  if [ -n "$pin" ]; then
    [ "$got" = "$pin" ] || die "$zip: sha256 $got, expected $pin (corrupt or different archive; removed nothing)"
    echo "$zip: sha256 verified"
  else
    var=WIKITEXT2_ZIP_SHA256
    [ "$name" = wikitext-103 ] && var=WIKITEXT103_ZIP_SHA256
    echo "$zip: sha256 $got (not pinned; export $var=$got to check it next time)"
  fi
  tmp=$(mktemp -d "$dest/.extract.XXXXXX")
  unzip -q "$zip" -d "$tmp" || { rm -rf "$tmp"; die "$zip: unzip failed"; }
  [ -f "$tmp/$name/wiki.train.tokens" ] || { rm -rf "$tmp"; die "$zip: no $name/wiki.train.tokens inside (not the word-level v1 archive?)"; }
  mkdir -p "$out"
  for f in train valid test; do mv -f "$tmp/$name/wiki.$f.tokens" "$out/"; done
  rm -rf "$tmp"
  if [ "$name" = wikitext-2 ]; then
    verify_wt2 "$out" || die "$out: extracted files do not match the pinned sha256 (see above)"
    echo "$out: train/valid/test sha256 verified"
  fi
  (cd "$out" && for f in wiki.train.tokens wiki.valid.tokens wiki.test.tokens; do echo "$(sha256 "$f")  $f"; done) > "$out/SHA256SUMS"
  echo "$out: ready (stretch data --source wikitext --path $out)"
}

case "$which_set" in
  2) get wikitext-2 "$WIKITEXT2_ZIP_SHA256" ;;
  103) get wikitext-103 "$WIKITEXT103_ZIP_SHA256" ;;
  all) get wikitext-2 "$WIKITEXT2_ZIP_SHA256"; get wikitext-103 "$WIKITEXT103_ZIP_SHA256" ;;
esac
