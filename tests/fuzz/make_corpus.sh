#!/usr/bin/env bash
# make_corpus.sh - regenerate the seed corpora in tests/fuzz/corpus/<target>/ from tiny
# real runs of the stretch binary: valid files (a checkpoint and safetensors of the fixed
# model in fuzz_targets.h, token caches, tokenizers of every kind, configs) and a few
# broken ones. Seeds carry the harness's mode byte (see fuzz_targets.h). Needs python3
# (zlib, to unpack a checkpoint payload). Total size stays well under 1 MB.
#   usage: STRETCH_BIN=build/stretch bash tests/fuzz/make_corpus.sh
set -euo pipefail
BIN="${STRETCH_BIN:?set STRETCH_BIN to the stretch binary}"
# absolute: the script works in a temp dir, where a relative build/stretch does not exist
BIN="$(realpath "$BIN")"
[ -x "$BIN" ] || { echo "make_corpus.sh: $BIN is not an executable" >&2; exit 2; }
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
DEST="$SRC/tests/fuzz/corpus"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/stretch-corpus-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
# built in the temp dir and moved into place at the end: a failure keeps the old corpus
OUT="$TMP/corpus"
mkdir -p "$OUT"/{config,checkpoint,safetensors,cache,tokenizer,sweep}

# raw FILE DEST MODEBYTE: the mode byte, then the file
raw() { { printf "\\x$(printf %02x "$3")"; cat "$1"; } >"$2"; }

# ---- a run of the fixed model (fuzz_targets.h: vocab 16, 1 layer, d 16, 2 heads, alibi)
cat >tiny.json <<EOF
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [2000, 500, 500]}},
 "train": {"batch_size": 2, "seq_len": 8, "steps": 2, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
EOF
"$BIN" train tiny.json --out run --quiet 2>/dev/null
"$BIN" export run --out exp >/dev/null
CK="run/checkpoints/$(cat run/checkpoints/latest)"

# ---- config: the repo's configs, the test configs, the resolved config, --set forms
i=0
for f in "$SRC"/configs/*.json "$SRC"/tests/configs/*.json tiny.json run/config.json; do
    [ -f "$f" ] || continue
    [ "$(stat -c %s "$f")" -lt 8192 ] || continue
    cp "$f" "$OUT/config/seed_$i.json"; i=$((i + 1))
done
printf '{"model": {"d_model": 32}}\x01model.pos=rope\x01train.steps=10\x01eval.lengths=[16,32]' >"$OUT/config/sets"
printf '\xef\xbb\xbf{"train": {"optimizer": {"name": "sgd", "no_decay": ["bias", "norm"]}}}' >"$OUT/config/bom"

# ---- checkpoint: raw (mode 0), its payload (mode 1), broken copies
raw "$CK" "$OUT/checkpoint/raw" 0
python3 - "$CK" "$OUT/checkpoint/payload" <<'PY'
import sys, zlib
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b'\x01' + zlib.decompress(d[64:]))
PY
head -c 200 "$OUT/checkpoint/payload" >"$OUT/checkpoint/payload_cut"
head -c 3000 "$OUT/checkpoint/raw" >"$OUT/checkpoint/raw_cut"

# ---- safetensors: raw (mode 0), header JSON (mode 1)
raw exp/model.safetensors "$OUT/safetensors/raw" 0
python3 - exp/model.safetensors "$OUT/safetensors/header" <<'PY'
import sys, struct
d = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', d[:8])[0]
open(sys.argv[2], 'wb').write(b'\x01' + d[8:8 + n].rstrip(b' '))
PY

# ---- cache and tokenizer: a text run (byte and BPE), a word-level run, synthetic
awk 'BEGIN { srand(7); split("the of and to a in is was it for on with as by at", w, " ");
     for (i = 0; i < 400; i++) { l = ""; for (j = 0; j < 9; j++) l = l w[int(rand() * 15) + 1] " "; print l "." } }' >corpus.txt
mkdir -p wt
head -300 corpus.txt >wt/train.txt; sed -n 301,350p corpus.txt >wt/valid.txt; sed -n 351,400p corpus.txt >wt/test.txt
"$BIN" data --source text --path corpus.txt --cache-dir cache --save-tokenizer tok_byte.json >/dev/null 2>&1
"$BIN" data --source text --path corpus.txt --tokenizer bpe --bpe-vocab 290 --cache-dir cache --save-tokenizer tok_bpe.json >/dev/null 2>&1
"$BIN" data --source wikitext --path wt --cache-dir wcache --save-tokenizer tok_word.json >/dev/null 2>&1
cp run/tokenizer.json tok_syn.json
k=0
for f in cache/*.valid.byte.tokens cache/*.valid.bpe*.tokens cache/*.vocab wcache/*.valid.*.tokens wcache/*.vocab; do
    [ -f "$f" ] || continue
    raw "$f" "$OUT/cache/raw_$k" 0
    raw "$f" "$OUT/cache/fixcrc_$k" 1
    k=$((k + 1))
done
# framed (mode 2): a header followed by raw planes / tokenizer JSON
F="$(ls cache/*.valid.byte.tokens | head -1)"
{ printf '\x02'; head -c 128 "$F"; head -c 600 corpus.txt; } >"$OUT/cache/framed_tokens"
V="$(ls cache/*.vocab | head -1)"
{ printf '\x02'; head -c 128 "$V"; cat tok_bpe.json; } >"$OUT/cache/framed_vocab"
for t in byte bpe word syn; do
    cp "tok_$t.json" "$OUT/tokenizer/$t.json"
    { cat "tok_$t.json"; printf '\0'; head -c 300 corpus.txt; printf '\xc3\xa9\xff\x00\x01 12 3\n'; } >"$OUT/tokenizer/${t}_text"
done
printf '{"format": "stretch-tokenizer", "version": 1, "kind": "bpe", "vocab_size": 258, "hash": "0000000000000000", "merges": [[104, 101], [256, 108]]}' \
    >"$OUT/tokenizer/bad_hash.json"
# ---- sweep: the repo's sweep files with the harness's synthetic base ("base.json"), an
# inline base, and broken forms
python3 - "$SRC" "$OUT/sweep" <<'PY'
import glob, json, os, sys
src, out = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(src + '/configs/sweep_*.json') + glob.glob(src + '/configs/results/*.json'))
for i, f in enumerate(files):
    d = json.load(open(f))
    if not isinstance(d, dict) or 'base' not in d:
        continue
    d['base'] = 'base.json'
    d.pop('description', None)
    text = json.dumps(d, indent=1)
    if len(text) < 8192:
        open('%s/seed_%d.json' % (out, i), 'w').write(text)
inline = {"base": {"model": {"n_layers": 1, "d_model": 16, "n_heads": 2},
                   "data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [2000, 500, 500]}},
                   "train": {"batch_size": 2, "seq_len": 8, "steps": 2, "schedule": {"warmup": 0}}},
          "variants": [{"name": "a", "model.pos": "alibi"}, {"name": "r", "model.pos": "rope"}],
          "grid": {"train.seed": [1, 2]},
          "eval": {"lengths": [8, 16], "mode": "sliding", "stride": 4}}
open(out + '/grid', 'w').write(json.dumps(inline))
open(out + '/cut', 'w').write(json.dumps(inline)[:90])
open(out + '/bad_key', 'w').write('{"base": "base.json", "grid": {"model.nope": [1]}}')
PY
rm -rf "$DEST"
mv "$OUT" "$DEST"
du -sh "$DEST"
ls "$DEST"/* | wc -l
