#!/usr/bin/env bash
# cli_badinput.sh - the bad-input catalogue, through the real binary ($STRETCH_BIN).
# Every case checks: the exit code documented in README (2 config, 3 I/O, 4 data,
# 5 checkpoint, 6 memory, 7 non-finite), a message naming the file (and the JSON key
# path for configs), no crash (no signal exit, no sanitizer report, no hang: each command
# runs under a timeout), and that nothing was lost or overwritten (md5 of the files
# before and after). Groups:
#   config     malformed JSON, wrong types, unknown keys, zero/negative/huge sizes,
#              d_model % n_heads, duplicate keys, --set errors
#   memory     a model, a training step or a synthetic corpus that cannot fit: refused
#              before allocating, with the GiB needed
#   data       missing / empty / binary file, a directory, a FIFO or a path under a file
#              in place of the corpus (root ignores chmod, so these stand for
#              "unreadable"), wikitext without splits, a valid word missing from train,
#              a corrupt token cache (rebuilt, not an error)
#   checkpoint truncated, bit-flipped, padded, empty, foreign and random files, a
#              directory and a FIFO for eval, export and generate; broken checkpoints and a
#              bad `latest` pointer for resume; resume with a changed model or data section
#   safetensors (train.init_from) truncated, header length out of range, broken JSON,
#              wrong dtype/shape/offsets, duplicate or unknown tensors, overlapping
#              tensors or bytes that belong to no tensor, another model
#   vocabulary tokenizer.json of another run (generate, export), a corpus changed after
#              training (eval), a prompt outside the vocabulary, --tokens beyond int64
#   outputs    an occupied run dir, a dir of other files, a regular file as --out, an
#              existing export: refused and byte-identical afterwards
#   lengths    learned positions evaluated beyond their table; absurd evaluation lengths
#              (2^62..2^63-1, with linear and log2 buckets: int64 overflow before the fix)
#   numerics   a diverging run (exit 7 naming the step and the last good checkpoint,
#              which still loads) and a NaN in init_from (exit 7 at step 1, no checkpoint)
# The last line reports how many bad inputs were tried.
set -u
BIN="${STRETCH_BIN:?set STRETCH_BIN to the stretch binary}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/stretch-badinput-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
PASS=0
FAIL=0
TRIED=0
TIMEOUT="${STRETCH_BADINPUT_TIMEOUT:-120}"
ok()  { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
snap() { (cd "$1" && find . -type f -exec md5sum {} + | sort); }
# flip FILE OFFSET: invert every bit of one byte (always a change, unlike writing a value)
flip() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\x$(printf %02x $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# run CMD...: RC, ERR (stderr); flags a signal exit, a hang or a sanitizer report
run() {
    timeout -k 5 "$TIMEOUT" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    ERR="$(cat "$TMP/err")"
    if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then bad "$* -> hang (killed after ${TIMEOUT}s)"; fi
    if [ "$RC" -gt 128 ] && [ "$RC" -ne 130 ]; then bad "$* -> killed by signal $((RC - 128))"; fi
    case "$ERR" in
        *"AddressSanitizer"*|*"LeakSanitizer"*|*"runtime error:"*|*"Assertion"*) bad "$* -> sanitizer/assert report: $ERR" ;;
    esac
}

# expect_msg_has SUBSTRING...: the last command's message names all of them
expect_msg_has() {
    local w
    for w in "$@"; do case "$ERR" in *"$w"*) ok ;; *) bad "message lacks '$w': $ERR" ;; esac; done
}

# expect CODE 'SUBSTRING' ['SUBSTRING2'] -- CMD...: one bad input
expect() {
    local code="$1"; shift
    local wants=()
    while [ "$1" != "--" ]; do wants+=("$1"); shift; done
    shift
    TRIED=$((TRIED + 1))
    run "$@"
    if [ "$RC" -ne "$code" ]; then bad "$* -> exit $RC, expected $code: $ERR"; return; fi
    local w
    for w in "${wants[@]}"; do
        case "$ERR" in *"$w"*) ;; *) bad "$* -> message lacks '$w': $ERR"; return ;; esac
    done
    ok
}

# ---- a tiny run everything below starts from ----
base_json() {   # base_json FILE [EXTRA TRAIN KEYS]
    cat >"$1" <<EOF
{
  "model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$TMP/cache", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
  "train": {"batch_size": 4, "seq_len": 16, "steps": 4, "eval_every": 2, "eval_batches": 1, "log_every": 1,
            "checkpoint_every": 2, "threads": 1, "schedule": {"kind": "constant", "warmup": 0}${2:-}}
}
EOF
}
CFG="$TMP/tiny.json"
base_json "$CFG"
run "$BIN" train "$CFG" --out run --quiet
check '[ "$RC" -eq 0 ] && [ -s run/checkpoints/step_00000004.ckpt ] && [ -s run/tokenizer.json ]' "tiny run failed: $ERR"
CK="run/checkpoints/step_00000004.ckpt"
run "$BIN" export run --out export
check '[ "$RC" -eq 0 ] && [ -s export/model.safetensors ]' "export failed: $ERR"
STF="export/model.safetensors"
RUN_SNAP="$(snap run)"

# =========================================================== config: exit 2 ====
# cfg_case 'JSON' 'EXPECTED KEY PATH MESSAGE': the file is c.json; nothing may be created
cfg_case() {
    printf '%s' "$1" >c.json
    expect 2 "c.json: $2" -- "$BIN" train c.json --out cfgout --quiet
    [ -e cfgout ] && { bad "config error left $TMP/cfgout behind"; rm -rf cfgout; }
}
M='"data": {"source": "synthetic", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}}'
cfg_case ''                                        'invalid JSON: unexpected end of file'
cfg_case '   '                                     'invalid JSON: unexpected end of file'
cfg_case '{"model": {"d_model": 16,'               'invalid JSON: unexpected end of file'
cfg_case '{"model": {"d_model": 16},}'             'invalid JSON'
cfg_case '{"model": {}} trailing'                  "invalid JSON at line 1, column 15 (byte 14), near 'trailing'"
cfg_case '{"model": {"d_model": NaN}}'             'invalid JSON at line 1'
cfg_case '{"model": {"d_model": 16}'$'\n''"x"'     'invalid JSON at line 2'
cfg_case '[1, 2]'                                  'expected a JSON object'
cfg_case 'null'                                    'expected a JSON object'
cfg_case "$(printf '[%.0s' $(seq 5000))"           'invalid JSON'
printf '{"model": {"d_model": 16}}\0' >c.json
expect 2 "c.json: invalid JSON: NUL byte" -- "$BIN" train c.json --out cfgout --quiet
# wrong types
cfg_case '{"model": {"d_model": "16"}}'            'model.d_model: expected an integer, got "16"'
cfg_case '{"model": {"d_model": 16.5}}'            'model.d_model: expected an integer, got 16.5'
cfg_case '{"model": {"d_model": 1e400}}'           'model.d_model: expected an integer'
cfg_case '{"model": {"pos": 3}}'                   'model.pos: expected one of'
cfg_case '{"model": {"tie_embeddings": 1}}'        'model.tie_embeddings: expected true or false, got 1'
cfg_case '{"model": []}'                           'model: expected an object, got []'
cfg_case '{"train": {"optimizer": {"lr": "fast"}}}' 'train.optimizer.lr: expected a number, got "fast"'
cfg_case '{"eval": {"lengths": "64"}}'             'eval.lengths: expected an array of integers, got "64"'
cfg_case '{"eval": {"lengths": [64, "x"]}}'        'eval.lengths[1]: expected an integer'
cfg_case '{"data": {"synthetic": {"tokens": [4000, 1000]}}}' 'data.synthetic.tokens: expected 3 integers'
cfg_case '{"data": {"path": 7}}'                   'data.path: expected a string, got 7'
cfg_case "{\"model\": {\"pos\": \"$(printf 'al\xffibi')\"}}" 'model.pos: unknown value'
# unknown keys
cfg_case '{"modle": {}}'                           'modle: unknown key (did you mean "model"?)'
cfg_case '{"model": {"n_head": 4}}'                'model.n_head: unknown key (did you mean "model.n_heads"?)'
cfg_case '{"train": {"optimizer": {"betas": [0.9, 0.95]}}}' 'train.optimizer.betas: unknown key'
cfg_case '{"data": {"synthetic": {"seeds": 1}}}'   'data.synthetic.seeds: unknown key'
cfg_case "{\"model\": {\"$(head -c 3000 /dev/zero | tr '\0' k)\": 1}}" 'model.kkkkkkkk'
cfg_case '{"model": {"d_model": 16, "d_model": 32}}' 'model.d_model: duplicate key'
# zero, negative, huge sizes; divisibility
cfg_case '{"model": {"d_model": 0}}'               'model.d_model: must be in [1, 65536], got 0'
cfg_case '{"model": {"d_model": -16}}'             'model.d_model: must be in [1, 65536], got -16'
cfg_case '{"model": {"d_model": 1e20}}'            'model.d_model: must be in [1, 65536], got 1e20'
cfg_case '{"model": {"n_layers": 0}}'              'model.n_layers: must be in'
cfg_case '{"model": {"n_heads": 0}}'               'model.n_heads: must be in [1, 256], got 0'
cfg_case '{"model": {"vocab_size": 1}}'            'model.vocab_size'
cfg_case '{"model": {"d_ff": -1}}'                 'model.d_ff'
cfg_case '{"model": {"max_len": 0}}'               'model.max_len'
cfg_case '{"model": {"d_model": 18, "n_heads": 4}}' 'model.n_heads: must divide model.d_model (18 % 4 != 0)'
cfg_case '{"model": {"dropout_attn": 1}}'          'model.dropout_attn'
cfg_case '{"train": {"batch_size": -1}}'           'train.batch_size: must be in [1,'
cfg_case '{"train": {"seq_len": 0}}'               'train.seq_len: must be in [1,'
cfg_case '{"train": {"steps": -1}}'                'train.steps: must be in [0, 1e12], got -1'
cfg_case '{"train": {"grad_accum": 0}}'            'train.grad_accum'
cfg_case '{"train": {"optimizer": {"lr": -1}}}'    'train.optimizer.lr: must be in (0,'
cfg_case '{"train": {"seed": -1}}'                 'train.seed: must be in [0,'
cfg_case '{"eval": {"lengths": [0]}}'              'eval.lengths[0]: must be in [1,'
cfg_case '{"data": {"synthetic": {"vocab": 1}}}'   'data.synthetic.vocab'
cfg_case '{"model": {"pos": "learned", "max_len": 8}, "train": {"seq_len": 16}}' 'train.seq_len: 16 exceeds the 8 tokens learned positions represent; model.max_len'
# --set assignments name "--set key"
expect 2 "--set model.d_model: must be in [1, 65536], got -1" -- "$BIN" train "$CFG" --set model.d_model=-1 --out cfgout --quiet
expect 2 '--set model.d_model: expected an integer, got "abc"' -- "$BIN" train "$CFG" --set model.d_model=abc --out cfgout --quiet
expect 2 "--set model.dmodel: unknown key" -- "$BIN" train "$CFG" --set model.dmodel=16 --out cfgout --quiet
expect 2 "--set model.n_heads=3: model.n_heads: must divide model.d_model" -- "$BIN" train "$CFG" --set model.n_heads=3 --out cfgout --quiet
check '[ ! -e cfgout ]' "a rejected --set created the run dir"

# =========================================================== memory: exit 6 ====
expect 6 "GiB" "model.d_model 65536" "model.n_layers 256" -- "$BIN" train "$CFG" --out mem1 --quiet \
    --set model.d_model=65536 --set model.n_layers=256 --set model.n_heads=256
expect 6 "GiB" "train.batch_size" -- "$BIN" train "$CFG" --out mem2 --quiet --set train.batch_size=100000 \
    --set train.seq_len=3000 --set train.eval_batches=0 --set 'data.synthetic.tokens=[4000000,1000,1000]'
# 3 x 2^31 synthetic tokens = 24 GiB (only where that exceeds the machine: elsewhere it would run)
MEM_KB=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ -n "$MEM_KB" ] && [ "$MEM_KB" -lt $((26 * 1024 * 1024)) ]; then
    expect 6 "tiny.json: data.synthetic.tokens" "GiB" -- "$BIN" train "$CFG" --out mem3 --quiet \
        --set 'data.synthetic.tokens=[2147483648,2147483648,2147483648]'
fi
# the refused run can be retried in the same directory (nothing half-made is left)
expect 0 "" -- "$BIN" train "$CFG" --out mem1 --quiet --set train.steps=1

# ============================================================= data: 3 / 4 ====
text_cfg() {   # text_cfg SOURCE PATH [EXTRA DATA KEYS]
    cat >d.json <<EOF
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2},
 "data": {"source": "$1", "path": "$2", "cache_dir": "$TMP/dcache"${3:-}},
 "train": {"batch_size": 2, "seq_len": 8, "steps": 1, "eval_batches": 0, "threads": 1, "schedule": {"warmup": 0}}}
EOF
}
: >empty.txt
mkdir -p adir
printf 'hello\n' >small.txt
printf 'some text\0with a NUL byte in the middle of it, and then more text to be long enough\n' >bin.txt
mkfifo fifo.txt
text_cfg text "$TMP/missing.txt";  expect 3 "$TMP/missing.txt: cannot open" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/empty.txt";    expect 4 "$TMP/empty.txt: empty file" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/adir";         expect 3 "$TMP/adir: is a directory" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/small.txt/x";  expect 3 "$TMP/small.txt/x: cannot open: Not a directory" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/fifo.txt";     expect 3 "$TMP/fifo.txt: not a regular file" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/bin.txt";      expect 4 "$TMP/bin.txt" "NUL byte" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/small.txt";    expect 4 "$TMP/small.txt: too small" -- "$BIN" train d.json --out dout --force --quiet
text_cfg text "$TMP/small.txt" ', "tokenizer": "bpe", "bpe_vocab": 300'
expect 4 "$TMP/small.txt: too small" -- "$BIN" train d.json --out dout --force --quiet
# too small and binary: the NUL is what is wrong with it (it said "too small")
printf 'a\0b' >nul3.txt
text_cfg text "$TMP/nul3.txt";     expect 4 "$TMP/nul3.txt: line 1: NUL byte at offset 1" -- "$BIN" train d.json --out dout --force --quiet
expect 4 "nul3.txt: line 1: NUL byte at offset 1" -- "$BIN" data --source text --path nul3.txt --cache-dir "$TMP/dcache"
printf 'x' >one.txt
expect 4 "one.txt: too small (1 byte) to split" -- "$BIN" data --source text --path one.txt --cache-dir "$TMP/dcache"
text_cfg wikitext "$TMP/adir";     expect 3 "$TMP/adir: no train.txt" -- "$BIN" train d.json --out dout --force --quiet
text_cfg wikitext "$TMP/small.txt"; expect 3 "$TMP/small.txt: not a directory" -- "$BIN" train d.json --out dout --force --quiet
text_cfg wikitext "$TMP/fifo.txt"; expect 3 "$TMP/fifo.txt" -- "$BIN" train d.json --out dout --force --quiet
# word level: a tiny WikiText-like corpus; a valid word that never occurs in train
mkdir -p wt
words="the cat sat on a mat and dog ran far big red"
for s in train valid test; do
    n=300; [ "$s" = train ] || n=40
    awk -v n="$n" -v w="$words" -v seed="${#s}" 'BEGIN { srand(seed); k = split(w, a, " ");
        for (i = 0; i < n; i++) { l = ""; for (j = 0; j < 10; j++) l = l " " a[int(rand() * k) + 1]; print l } }' >"wt/$s.txt"
done
cp wt/valid.txt wt/valid.orig
echo " the unicorn sat" >>wt/valid.txt
text_cfg wikitext "$TMP/wt"
expect 4 "$TMP/wt/valid.txt: line 41: word \"unicorn\" is not in the training vocabulary" -- "$BIN" train d.json --out dout --force --quiet
mv wt/valid.orig wt/valid.txt
expect 0 "" -- "$BIN" train d.json --out wrun --quiet --set train.eval_batches=1
# a corrupt token cache is a logged miss and is rebuilt: still exit 0, the cache named
CACHE="$(ls "$TMP"/dcache/*.train.word.tokens 2>/dev/null | head -1)"
if [ -n "$CACHE" ]; then
    flip "$CACHE" 140
    expect 0 "$CACHE" "rebuilding" -- "$BIN" train d.json --out wrun2 --quiet
    head -c 100 "$CACHE" >"$CACHE.cut" && mv "$CACHE.cut" "$CACHE"
    expect 0 "$CACHE" "rebuilding" -- "$BIN" train d.json --out wrun3 --quiet
else
    bad "no word-level token cache in $TMP/dcache"
fi
# the corpus changed after training: eval and resume refuse the new vocabulary (exit 4)
expect 0 "" -- "$BIN" train d.json --out wpart --quiet --set train.eval_batches=1 --stop-after 2
echo "zebra" >>wt/train.txt
expect 4 "vocabulary of" -- "$BIN" eval wrun --lengths 8 --quiet
expect 4 "vocabulary" "changed since the checkpoint" -- "$BIN" train --resume wpart --quiet
rm -rf dout

# ======================================================= checkpoints: exit 5 ====
# ck_case 'HOW TO BREAK x.ckpt' 'MESSAGE': eval, export and generate refuse it
ck_case() {
    rm -rf x.ckpt exx
    cp "$CK" x.ckpt
    eval "$1"
    expect "${3:-5}" "x.ckpt" "$2" -- "$BIN" eval x.ckpt --lengths 16 --quiet
    expect "${3:-5}" "x.ckpt" "$2" -- "$BIN" export x.ckpt --out exx
    check '[ ! -e exx/model.safetensors ]' "export of a bad checkpoint wrote exx/"
    expect "${3:-5}" "x.ckpt" "$2" -- "$BIN" generate x.ckpt --tokens 2
}
SIZE=$(stat -c %s "$CK")
ck_case 'head -c $((SIZE / 2)) "$CK" >x.ckpt'    "truncated or padded checkpoint"
ck_case 'head -c 40 "$CK" >x.ckpt'               "truncated checkpoint: 40 bytes"
ck_case ': >x.ckpt'                              "truncated checkpoint: 0 bytes"
ck_case 'echo junk >>x.ckpt'                     "truncated or padded checkpoint"
ck_case 'flip x.ckpt $((SIZE - 100))'             "CRC32 mismatch"
ck_case 'flip x.ckpt 200'                         "CRC32 mismatch"
ck_case 'flip x.ckpt 35'                          "CRC32 mismatch"
ck_case 'printf "\x09" | dd of=x.ckpt bs=1 seek=8 conv=notrunc 2>/dev/null' "checkpoint version 9"
ck_case 'cp "$CFG" x.ckpt'                       "not a stretch checkpoint"
ck_case 'cp "$STF" x.ckpt'                       "not a stretch checkpoint"
ck_case 'head -c 5000 /dev/urandom >x.ckpt'      "not a stretch checkpoint"
ck_case 'rm x.ckpt; mkdir x.ckpt'                "no checkpoint yet" 3
ck_case 'rm x.ckpt; mkfifo x.ckpt'               "not a regular file" 3
rm -rf x.ckpt
# resume: a broken latest checkpoint, a bad pointer, a changed model or data section;
# every refusal leaves the run byte-identical
for how in trunc flip; do
    rm -rf rr && cp -r run rr
    L="rr/checkpoints/$(cat rr/checkpoints/latest)"
    if [ "$how" = trunc ]; then head -c 1000 "$L" >"$L.cut" && mv "$L.cut" "$L"; msg="truncated"
    else flip "$L" 3000; msg="CRC32 mismatch"; fi
    B4="$(snap rr)"
    expect 5 "$L" "$msg" -- "$BIN" train --resume rr --quiet --set train.steps=8
    check '[ "$(snap rr)" = "$B4" ]' "resume from a $how checkpoint modified the run"
done
rm -rf rr && cp -r run rr
echo "../../etc/passwd" >rr/checkpoints/latest
expect 5 "rr/checkpoints/latest: malformed checkpoint pointer" -- "$BIN" train --resume rr --quiet
echo "step_00000099.ckpt" >rr/checkpoints/latest
expect 3 "step_00000099.ckpt" -- "$BIN" eval rr --lengths 16 --quiet
rm -rf rr && cp -r run rr
B4="$(snap rr)"
expect 2 "model.d_model: 16 vs 32" -- "$BIN" train --resume rr --quiet --set model.d_model=32
expect 2 "model.pos" -- "$BIN" train --resume rr --quiet --set model.pos=rope
expect 2 "data.synthetic.seed" -- "$BIN" train --resume rr --quiet --set data.synthetic.seed=7
check '[ "$(snap rr)" = "$B4" ]' "a refused resume modified the run"
expect 3 "not a run directory" -- "$BIN" train --resume "$TMP/adir" --quiet
check '[ "$(snap run)" = "$RUN_SNAP" ]' "the source run was modified by the checkpoint cases"

# ================================================ safetensors (init_from): 5 ====
st_case() {   # st_case CODE 'MESSAGE'  (y.st prepared by the caller)
    expect "$1" "$TMP/y.st" "$2" -- "$BIN" train "$CFG" --out stout --force --quiet --set "train.init_from=$TMP/y.st"
}
STSIZE=$(stat -c %s "$STF")
cp "$STF" y.st;                           expect 0 "" -- "$BIN" train "$CFG" --out stout --quiet --set "train.init_from=$TMP/y.st"
head -c $((STSIZE - 10)) "$STF" >y.st;    st_case 5 "do not fit the tensor or the file"
head -c 100 "$STF" >y.st;                 st_case 5 "not a safetensors file"
: >y.st;                                  st_case 5 "not a safetensors file (too short)"
cp "$CK" y.st;                            expect 0 "" -- "$BIN" train "$CFG" --out stout --force --quiet --set "train.init_from=$TMP/y.st"   # a checkpoint: its weights
cp "$STF" y.st; printf '\xff\xff\xff\xff\xff\xff\xff\x7f' | dd of=y.st bs=1 conv=notrunc 2>/dev/null
st_case 5 "header length 9223372036854775807"
cp "$STF" y.st; printf '\x01' | dd of=y.st bs=1 seek=8 conv=notrunc 2>/dev/null
st_case 5 "header is not a JSON object"
rm -f y.st; mkfifo y.st;                  st_case 3 "not a regular file"
rm -f y.st; mkdir y.st;                   st_case 3 "no checkpoint yet"   # a directory is a run to start from
rm -rf y.st
if command -v python3 >/dev/null 2>&1; then
    # rewrite the header with a Python edit: st_edit 'PYTHON ON h (dict)'
    st_edit() {
        python3 - "$STF" y.st "$1" <<'PY'
import json, struct, sys
src, dst, code = sys.argv[1], sys.argv[2], sys.argv[3]
d = open(src, 'rb').read()
n = struct.unpack('<Q', d[:8])[0]
h = json.loads(d[8:8 + n])
body = d[8 + n:]
extra = ''   # raw JSON text appended to the object (duplicate keys)
exec(code)
js = json.dumps(h)
if extra:
    js = js[:-1] + extra + '}'
js = js.encode()
js += b' ' * ((8 - len(js) % 8) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(js)) + js + body)
PY
    }
    st_edit 'h["tok_emb.weight"]["dtype"] = "F16"';               st_case 5 "tok_emb.weight: dtype must be F32"
    st_edit 'h["tok_emb.weight"]["shape"] = [16, 1e300]';          st_case 5 "tok_emb.weight: shape mismatch"
    st_edit 'h["tok_emb.weight"]["shape"] = [16]';                 st_case 5 "tok_emb.weight: expected 2 dims"
    st_edit 'h["tok_emb.weight"]["data_offsets"] = [0, 1e300]';    st_case 5 "tok_emb.weight: data_offsets"
    st_edit 'h["tok_emb.weight"]["data_offsets"] = [-1024, 0]';    st_case 5 "tok_emb.weight: data_offsets"
    st_edit 'h["tok_emb.weight"]["data_offsets"] = [0.5, 1024.5]'; st_case 5 "tok_emb.weight: data_offsets"
    st_edit 'h["tok_emb.weight"]["data_offsets"] = "0"';           st_case 5 "tok_emb.weight: bad data_offsets"
    st_edit 'h["tok_emb.weight"] = 5';                             st_case 5 "tok_emb.weight: dtype must be F32"
    st_edit 'del h["ln_f.bias"]';                                  st_case 5 "tensor 'ln_f.bias' is missing"
    st_edit 'h["pos_emb.weight"] = h["ln_f.bias"]';                st_case 5 "tensor 'pos_emb.weight' is not a parameter"
    st_edit 'h = [h]';                                             st_case 5 "header is not a JSON object"
    st_edit 'extra = ", \"ln_f.bias\": " + json.dumps(h["ln_f.bias"])'; st_case 5 "tensor 'ln_f.bias' appears twice"
    # the tensors must tile the data buffer (issue 14 item 3): no shared bytes, no holes
    st_edit 'h["ln_f.bias"]["data_offsets"] = h["ln_f.weight"]["data_offsets"]'; st_case 5 "overlap"
    expect_msg_has "ln_f.weight" "ln_f.bias"
    st_edit 'k = max((t for t in h if t != "__metadata__"), key=lambda t: h[t]["data_offsets"][0]); a, b = h[k]["data_offsets"]; body = body[:a] + bytes(64) + body[a:]; h[k]["data_offsets"] = [a + 64, b + 64]'
    st_case 5 "belong to no tensor"
    st_edit 'body += bytes(8)';                                    st_case 5 "after the last tensor"
fi
run "$BIN" train "$CFG" --out other --quiet --set model.d_model=32 --set model.n_heads=4
run "$BIN" export other --out other_export
cp other_export/model.safetensors y.st;  st_case 5 "tok_emb.weight: shape mismatch"
run "$BIN" train "$CFG" --out learned --quiet --set model.pos=learned --set model.max_len=16
run "$BIN" export learned --out learned_export
cp learned_export/model.safetensors y.st; st_case 5 "tensor 'pos_emb.weight' is not a parameter of this model (alibi positions)"
rm -rf stout

# ====================================================== vocabulary: exit 4 ====
run "$BIN" train "$CFG" --out run32 --quiet --set data.synthetic.vocab=32
run "$BIN" train "$CFG" --out runseed --quiet --set data.synthetic.seed=99
for other in run32 runseed; do   # another size, and the same size with another hash
    rm -rf rv && cp -r run rv && cp "$other/tokenizer.json" rv/tokenizer.json
    B4="$(snap rv)"
    expect 4 "rv/tokenizer.json: tokenizer does not match" "another run" -- "$BIN" generate rv --tokens 3
    expect 4 "rv/tokenizer.json: tokenizer does not match" -- "$BIN" export rv --out rvx
    check '[ ! -e rvx ] && [ "$(snap rv)" = "$B4" ]' "refused export wrote something"
done
printf '{"format": "stretch-tokenizer", "version": 1' >rv/tokenizer.json
expect 4 "rv/tokenizer.json: not a valid JSON tokenizer file" -- "$BIN" generate rv --tokens 3
expect 4 'prompt "99"' -- "$BIN" generate run --prompt 99 --tokens 3
expect 2 "--tokens" -- "$BIN" generate run --tokens 99999999999999999999

# ================================================= occupied outputs: exit 3 ====
expect 3 "run: already holds a run" "--force" -- "$BIN" train "$CFG" --out run --quiet
check '[ "$(snap run)" = "$RUN_SNAP" ]' "an occupied run dir was modified"
mkdir -p notes && echo "my notes" >notes/notes.txt
NB4="$(snap notes)"
expect 3 "notes: directory is not empty (holds 'notes.txt')" -- "$BIN" train "$CFG" --out notes --quiet
check '[ "$(snap notes)" = "$NB4" ]' "a directory of other files was modified"
echo "precious" >afile
expect 3 "afile: exists and is not a directory" -- "$BIN" train "$CFG" --out afile --quiet
check '[ "$(cat afile)" = "precious" ]' "a regular file given as --out was modified"
EB4="$(snap export)"
expect 3 "export/model.safetensors: already exists" "--force" -- "$BIN" export run --out export
check '[ "$(snap export)" = "$EB4" ]' "an existing export was modified"
expect 3 "afile" -- "$BIN" export run --out afile/sub
check '[ "$(cat afile)" = "precious" ]' "export under a regular file modified it"

# ====================================== learned positions beyond their table ====
expect 2 "model.max_len" -- "$BIN" eval learned --lengths 32,64 --quiet
# a doubling range whose next length would overflow int64 (UB before the fix), and absurd
# lengths with per-position buckets (linear and log2 layouts overflowed int64): since the
# flag takes eval.lengths' range from the schema, refused up front
expect 2 "as eval.lengths" -- "$BIN" eval run --lengths 4611686018427387904..9223372036854775807 --max-tokens 64 --quiet --json big.json --force
expect 2 "as eval.lengths" -- "$BIN" eval run --lengths 9223372036854775807 --buckets 16 --max-tokens 64 --quiet --json big.json --force
# the largest length the key allows, with both bucket layouts, still runs (clipped to the text)
expect 0 "" -- "$BIN" eval run --lengths 4194304..16777216 --max-tokens 64 --quiet --json big.json --force
expect 0 "" -- "$BIN" eval run --lengths 16777216 --buckets 16 --max-tokens 64 --quiet --json big.json --force
expect 0 "" -- "$BIN" eval run --lengths 16777216 --buckets 4 --bucket-scale log2 --max-tokens 64 --quiet --json big.json --force
run "$BIN" eval learned --lengths 16,32 --quiet --json lrn.json
check '[ "$RC" -eq 0 ] && grep -q "max_len" lrn.json' "learned 16,32: exit $RC, the 32 row should be an error row: $ERR"

# ============================================================ numerics: 7 ====
expect 7 "non-finite" "last good checkpoint: div/checkpoints/step_" -- "$BIN" train "$CFG" --out div --quiet \
    --set train.steps=60 --set train.checkpoint_every=1 --set train.optimizer.name=sgd \
    --set train.optimizer.lr=100 --set train.clip_norm=0 --set train.eval_batches=0
GOOD="$(printf '%s' "$ERR" | sed -n 's/.*last good checkpoint: \([^)]*\)).*/\1/p')"
STEP="$(printf '%s' "$ERR" | sed -n 's/.*step \([0-9]*\): non-finite.*/\1/p')"
check '[ -n "$GOOD" ] && [ -s "$GOOD" ] && [ "div/checkpoints/$(cat div/checkpoints/latest)" = "$GOOD" ]' \
      "last good checkpoint '$GOOD' is not the latest one"
check '[ -n "$STEP" ] && [ "$GOOD" = "$(printf "div/checkpoints/step_%08d.ckpt" $((STEP - 1)))" ]' \
      "divergence at step '$STEP' but the last good checkpoint is $GOOD"
# it loads (its parameters are finite; its loss may well be huge, eval then exits 7)
run "$BIN" export "$GOOD" --out goodx
check '[ "$RC" -eq 0 ] && [ -s goodx/model.safetensors ]' "the last good checkpoint does not load: $ERR"
if command -v python3 >/dev/null 2>&1; then
    st_edit 'pass'
    python3 - y.st <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', d[:8])[0]
d[8 + n + 8:8 + n + 12] = struct.pack('<f', float('nan'))   # tok_emb.weight[0][2]
open(sys.argv[1], 'wb').write(d)
PY
    expect 7 "step 1: non-finite" -- "$BIN" train "$CFG" --out nan --quiet --set "train.init_from=$TMP/y.st"
    check '[ ! -e nan/checkpoints/latest ]' "a checkpoint was written from a NaN init"
fi

echo "cli_badinput: $TRIED bad inputs tried; $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
