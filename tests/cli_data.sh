#!/usr/bin/env bash
# cli_data.sh - `stretch data` end to end: the synthetic corpus (ideal perplexity line),
# a text file with byte and BPE tokenizers (cache files reported, second run from cache,
# --save-tokenizer), WikiText-2 counts when the shared data is present, and the exit codes:
# usage / bad values 2, missing file 3, empty or binary file 4; copy mode (--syn-mode copy)
# and a copy-key range error from a run config.
. "$(dirname "$0")/lib_cli.sh" cli_data

# synthetic: counts and the ideal perplexity exp(H)
expect_rc 0 "synthetic" "$BIN" data --source synthetic --syn-tokens 20000,2000,2000
expect_out "train *20,000"
expect_out "ideal perplexity exp(H) = [0-9.]*"
# copy mode: one more symbol (the marker) and a lower floor (data/README.md, "Copy mode")
expect_rc 0 "synthetic copy" "$BIN" data --source synthetic --syn-order 1 --syn-mode copy --syn-tokens 20000,2000,2000
expect_out "vocab 65"
expect_out "entropy     0.918438 nats/token"
expect_rc 2 "synthetic bad mode" "$BIN" data --source synthetic --syn-mode recall
expect_err "data.synthetic.mode"
# the copy keys in a run config: range errors name the file and the key path
echo '{"data": {"synthetic": {"mode": "copy", "copy": {"len": 8, "min_dist": 5}}}}' > copy.json
expect_rc 2 "copy min_dist <= len" "$BIN" train copy.json --out copyrun
expect_err "copy.json: data.synthetic.copy.min_dist"
expect_rc 0 "synthetic small" "$BIN" data --source synthetic --syn-vocab 3 --syn-order 1 --syn-branch 2 --syn-tokens 100,100,100
expect_out "entropy"

# a text file: byte, then BPE (cold, then from cache), tokenizer saved
for i in $(seq 1 400); do echo "line $i of the corpus: the quick brown fox jumps over the lazy dog $((i * 7))"; done > corpus.txt
expect_rc 0 "text byte" "$BIN" data --source text --path corpus.txt --cache-dir cache
expect_out "tokenizer   byte  vocab 256"
expect_out "cache/corpus.txt-.*\.train\.byte\.tokens"
expect_rc 0 "text bpe" "$BIN" data --source text --path corpus.txt --tokenizer bpe --bpe-vocab 300 --cache-dir cache --save-tokenizer tok.json
expect_out "vocab cache .*bpe300.vocab"
expect_out "(0/3 splits from cache)"
[ -s tok.json ] && grep -q '"kind":"bpe"' tok.json && ok || bad "tok.json not written"
expect_rc 0 "text bpe cached" "$BIN" data --source text --path corpus.txt --tokenizer bpe --bpe-vocab 300 --cache-dir cache
expect_out "(3/3 splits from cache)"
if compgen -G "cache/*.tmp.*" >/dev/null; then bad "temporary files left in the cache"; else ok; fi
# an edit that keeps size and mtime, in the middle of a file over 2 MiB (cache format 1
# checksummed only the first and last MiB and served the old tokens): rebuilt
for i in $(seq 1 60000); do echo "row $i: the quick brown fox jumps over the lazy dog"; done > big.txt
expect_rc 0 "big text" "$BIN" data --source text --path big.txt --cache-dir bcache
expect_out "(0/3 splits from cache)"
expect_rc 0 "big text, cached" "$BIN" data --source text --path big.txt --cache-dir bcache
expect_out "(3/3 splits from cache)"
cp -p big.txt big.orig
sed -i 's/^row 30000: the quick/row 30000: QQQ quick/' big.txt
touch -r big.orig big.txt
[ "$(stat -c %s.%Y big.txt)" = "$(stat -c %s.%Y big.orig)" ] && ! cmp -s big.txt big.orig && ok || bad "the edit changed size or mtime"
expect_rc 0 "big text, edited in the middle" "$BIN" data --source text --path big.txt --cache-dir bcache
expect_out "(0/3 splits from cache)"
expect_err "the source file changed"

# WikiText-2, when the shared data is there
W=${STRETCH_DATA_DIR:-}/wikitext-2
if [ -f "$W/train.txt" ]; then
    expect_rc 0 "wikitext-2" "$BIN" data --source wikitext --path "$W" --cache-dir wcache
    expect_out "vocab 33278"
    expect_out "train *2,088,628"
    expect_out "valid *217,646"
    expect_out "test *245,569"
else
    skip "wikitext-2: $W/train.txt not found"
fi

# errors and exit codes
expect_rc 2 "no source" "$BIN" data
expect_rc 2 "positional config" "$BIN" data cfg.json
expect_rc 2 "unknown flag" "$BIN" data --source synthetic --frobnicate 1
expect_rc 2 "bad number" "$BIN" data --source synthetic --syn-vocab many
expect_rc 2 "bad bpe vocab" "$BIN" data --source text --path corpus.txt --tokenizer bpe --bpe-vocab 100
expect_err "data.bpe_vocab"
expect_rc 2 "bad source" "$BIN" data --source wiki
expect_err "data.source"
expect_rc 3 "missing file" "$BIN" data --source text --path nope.txt --cache-dir cache
expect_err "nope.txt"
: > empty.txt
expect_rc 4 "empty file" "$BIN" data --source text --path empty.txt --cache-dir cache
expect_err "empty.txt: empty file"
head -c 4096 "$BIN" > blob.bin   # an ELF header: NUL bytes from byte 7 on
expect_rc 4 "binary file" "$BIN" data --source text --path blob.bin --cache-dir cache
expect_err "blob.bin.*NUL byte"
expect_rc 0 "help" "$BIN" data --help
expect_out "usage: stretch data"

finish cli_data
