#!/bin/bash
# cli_probe2.sh - regression tests of the second probe's findings 3, 5 and 9:
#   - a directory stretch writes into (train --out / --resume and its default, sweep
#     OUT/<point>, extend's --out and its default RUN-to<N>, export --out) longer than
#     ST_PATH_MAX - ST_DIR_ROOM (3008 bytes) is refused up front with exit 2 naming the
#     flag, before any step trains; eval refuses a source whose default report name would
#     be too long before evaluating, naming RUN_DIR|CHECKPOINT;
#   - a thread count other than the one asked for (4096 -> the 64 OpenBLAS runs) is said;
#   - generate streams its text: output is in the file before the process ends, and the
#     streamed bytes equal the whole-text decoding (cache = --no-cache, ids = text, prefix).
. "$(dirname "$0")/lib_cli.sh" cli_probe2

tiny_synthetic_cfg syn.json
expect_rc 0 "train the tiny run" "$BIN" train syn.json --out r --quiet

# mk N: a relative path of exactly N bytes, of 250-byte components (a file system limit is
# 255 per name); its parent is created
comp=$(printf 'd%.0s' $(seq 250))
mk() {
    local p=""
    while [ $((${#p} + 251)) -lt "$1" ]; do p="$p$comp/"; done
    p="$p$(printf 'e%.0s' $(seq $(($1 - ${#p}))))"
    mkdir -p "$(dirname "$p")"
    echo "$p"
}
# refused WHAT FLAG DIR CMD...: exit 2 naming FLAG, no training output, DIR not created
refused() {
    local what=$1 flag=$2 dir=$3; shift 3
    expect_rc 2 "$what" "$@"
    expect_err "$flag"
    grep -q "validation loss\|step [0-9]" err.txt && bad "$what: trained before refusing" || ok
    [ -e "$dir" ] && bad "$what: $(echo "$dir" | tail -c 30) was created" || ok
}

# ---- finding 3: room for the file names stretch appends ----
p=$(mk 3008)
expect_rc 0 "train --out of 3008 bytes (the limit)" "$BIN" train syn.json --out "$p"
[ -f "$p/checkpoints/latest" ] && ok || bad "train --out of 3008 bytes: no checkpoint"
p=$(mk 3009)
refused "train --out of 3009 bytes" "--out: directory path is 3009 bytes long" "$p" "$BIN" train syn.json --out "$p"
p=$(mk 3050)
refused "train --out of 3050 bytes" "--out: directory path is 3050 bytes long" "$p" "$BIN" train syn.json --out "$p"
grep -q "up to 3008 bytes" err.txt && ok || bad "train --out: the message does not give the limit"

cat > sw.json <<'EOF'
{"base": "syn.json", "variants": [{"name": "rope", "model.pos": "rope"}, {"name": "alibi", "model.pos": "alibi"}],
 "eval": {"lengths": [16]}, "out": "swo"}
EOF
p=$(mk 3040)
refused "sweep --out of 3040 bytes" "--out: run directory OUT/rope" "$p" "$BIN" sweep sw.json --out "$p"

# a run at a long path (copied there: stretch would not write it)
long=$(mk 3030)
cp -r r "$long"
refused "eval of a checkpoint whose default report is too long" "RUN_DIR|CHECKPOINT" \
    "$long/eval_valid_nonoverlapping_step_00000002.json" "$BIN" eval "$long/checkpoints/step_00000002.ckpt" --lengths 16
[ -s out.txt ] && bad "eval printed a table before refusing" || ok
expect_err "use a shorter path"
expect_rc 0 "the same eval with --json" "$BIN" eval "$long/checkpoints/step_00000002.ckpt" --lengths 16 --json e.json --quiet
expect_rc 0 "eval of the long run dir (its report fits)" "$BIN" eval "$long" --lengths 16 --quiet
# the same for a task run's report (eval --task), a checkpoint outside any checkpoints/
tiny_task_cfg task.json
expect_rc 0 "train a copy-task run" "$BIN" train task.json --out trun --quiet
tlong=$(mk 3060)
mkdir -p "$tlong" && cp trun/checkpoints/step_00000002.ckpt "$tlong/x.ckpt"
refused "eval --task of a checkpoint whose default report is too long" "RUN_DIR|CHECKPOINT" \
    "$tlong/eval_task_copy_x.json" "$BIN" eval "$tlong/x.ckpt" --task --sizes 2 --trials 2
[ -s out.txt ] && bad "eval --task printed a table before refusing" || ok
expect_rc 0 "the same eval --task with --json" "$BIN" eval "$tlong/x.ckpt" --task --sizes 2 --trials 2 --json tk.json --quiet

base=$(mk 3040)
cp -r r "$base"
refused "extend with a default --out of 3045 bytes" "--out (not given: RUN_DIR-to<N>)" "$base-to32" \
    "$BIN" extend "$base" --to 32 --steps 1
p=$(mk 3050)
refused "export --out of 3050 bytes" "--out: directory path is 3050 bytes long" "$p" "$BIN" export r --out "$p"

# ---- finding 9: a thread count other than the one asked for is said ----
expect_rc 0 "train with train.threads=4096" "$BIN" train syn.json --out t1 --quiet --set train.threads=4096
expect_err "threads: 4096 asked for (train.threads or --threads), [0-9]* used"
expect_rc 0 "eval --threads 4096" "$BIN" eval r --lengths 16 --threads 4096 --json t.json --quiet
expect_err "threads: 4096 asked for"
expect_rc 0 "train with train.threads=1" "$BIN" train syn.json --out t2 --quiet --set train.threads=1
grep -q "asked for" err.txt && bad "warned about 1 thread: $(cat err.txt)" || ok
expect_rc 0 "train with train.threads=0 (all cores)" "$BIN" train syn.json --out t3 --quiet --set train.threads=0
grep -q "asked for" err.txt && bad "warned about 0 = all cores: $(cat err.txt)" || ok

# ---- finding 5: generate streams its text ----
# text is in the file while the process runs (before: printed at the end only)
"$BIN" generate r --tokens 1000000 > stream.txt 2>/dev/null &
pid=$!
sleep 1
if kill -0 "$pid" 2>/dev/null; then
    [ -s stream.txt ] && ok || bad "generate wrote nothing to stdout after 1 s"
    kill -TERM "$pid"   # (a background job of a script ignores SIGINT)
else
    bad "generate --tokens 1000000 ended within 1 s: the streaming check says nothing"
fi
wait "$pid" 2>/dev/null
# what was printed before the signal is the start of the same text
b=$(wc -c < stream.txt)
[ "$b" -gt 0 ] && "$BIN" generate r --tokens 2000 2>/dev/null | head -c "$((b < 4000 ? b : 4000))" > full.txt
[ "$b" -gt 0 ] && cmp -s full.txt <(head -c "$((b < 4000 ? b : 4000))" stream.txt) && ok ||
    bad "the interrupted text is not the start of the text"

# the streamed bytes are those of the whole text: the KV cache and --no-cache paths print
# the same, a run's ids decoded by its tokenizer equal the ids printed without one, and
# fewer tokens print a prefix of more
same_text "synthetic ids" r --tokens 300 --seed 4
cp -r r r_notok && rm r_notok/tokenizer.json
expect_rc 0 "generate without tokenizer.json" "$BIN" generate r_notok --tokens 300 --seed 4
cmp -s out.txt cached.txt && ok || bad "ids printed without a tokenizer differ from the synthetic tokenizer's text"
tiny_text_run rope
expect_rc 0 "train a byte run" "$BIN" train cfg.json --out rb --quiet
same_text "byte run" rb --prompt "the quick" --tokens 200 --seed 3
grep -q "^the quick" out.txt && ok || bad "byte run: the text does not start with the prompt"
# without --prompt the run starts from token 0, a NUL byte: context, not text (it once
# ended the printed text before its first character, leaving an empty line)
expect_rc 0 "byte run without --prompt" "$BIN" generate rb --tokens 50 --seed 3
[ "$(wc -c < out.txt)" -gt 20 ] && ok || bad "byte run without --prompt printed $(wc -c < out.txt) byte(s)"
[ "$(head -c 1 out.txt | od -An -tu1 | tr -d ' ')" != 0 ] && ok || bad "byte run without --prompt: the text starts with a NUL"
for i in $(seq 1 200); do echo "the quick brown fox jumps over the lazy dog"; echo "a dog and a fox"; done > words.txt
sed 's/"corpus.txt", "tokenizer": "byte"/"words.txt", "tokenizer": "word"/' cfg.json > wcfg.json
expect_rc 0 "train a word-level run" "$BIN" train wcfg.json --out rw --quiet
same_text "word-level run" rw --prompt "the quick" --tokens 200 --seed 3 --temperature 2
grep -q "^the quick " out.txt && ok || bad "word-level run: the text does not start with the prompt and a space"
[ "$(grep -c '' out.txt)" -gt 2 ] && ok || bad "word-level run: no <eos> line breaks in 200 tokens at temperature 2"
head -c -1 out.txt > w200.txt
expect_rc 0 "word-level run, 100 tokens" "$BIN" generate rw --prompt "the quick" --tokens 100 --seed 3 --temperature 2
cmp -s <(head -c -1 out.txt) <(head -c "$(($(wc -c < out.txt) - 1))" w200.txt) && ok ||
    bad "word-level run: 100 tokens are not the start of 200"

finish cli_probe2
