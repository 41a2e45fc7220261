#!/usr/bin/env bash
# cli_probe6.sh - the findings of the sixth round of black-box probes (blockwise attention,
# context extension, tasks, generate, corrupt inputs, numeric flags) that are not checked
# beside their feature's own tests:
#   - generate's sliding KV cache under --blockwise B or --window W is as long as the text,
#     not 2B or W keys whatever the text: --blockwise 16777216 for 30 tokens allocated 20 GiB
#     and tabulated 1 GiB of bias (5 s), refused an xpos run (exit 2, xpos's limit) and, for
#     a larger model, --window 10000000 was refused for memory (exit 6); eval --task's
#     cache (one instance long) likewise;
#   - number flags take decimal notation only: --window, --blockwise, --max-tokens, --scale
#     and the others read through strtod took hex ("0x10" = 16) where --context 0x10 and
#     --set eval.window=0x10 are refused;
#   - docs/evaluation.md said a --lengths entry may exceed eval.lengths' 2^24; it is refused;
#   - a checkpoints/latest pointer past 4 KiB is malformed (exit 5, as a pointer with a
#     slash), not an I/O error (exit 3);
#   - generate --no-cache warned that the text would pass --context (its sinks or blocks
#     then differing from the cache's) when it ended exactly there: the last token sampled
#     is never fed, and the two texts are the same;
#   - generate --temperature 1e-300 (below float's range) drew garbage (0 / 0 = NaN
#     weights); it is now the T -> 0 limit, the greedy text;
#   - generate's cache kept --sinks K rows whatever the text: --sinks 16777216 --window 1
#     for 30 tokens took 8 GiB and 44 s (exit 6 for a d_model 128 model);
#   - a standard output that cannot be written (a full disk, a closed descriptor) is exit 3:
#     generate > /dev/full exited 0 with its text lost (and generated on), so did eval's
#     table and data --show's rows;
#   - --json / --save-tokenizer PATH --force renamed a new file over a device, FIFO or
#     symbolic link (as root, eval --json /dev/null --force replaced /dev/null itself);
#     such a path is refused (exit 3), and so is it where a command names the file itself
#     (eval's default report, before evaluating; export --force's files, before any is
#     written; every other writer when it opens the file);
#   - train --out X --force where X/checkpoints is a file removed X's config.json,
#     metrics.jsonl and tokenizer.json, then failed (exit 3) and trained nothing: refused
#     now before anything is removed;
#   - bench with nothing to measure (--no-train, --no-eval, --sgemm 0, no --decode) printed
#     its header and exited 0; refused now (exit 2);
#   - train --resume R --stop-after N on a run already past step N exited 0 having trained
#     nothing, without a word; it warns now;
. "$(dirname "$0")/lib_cli.sh" cli_probe6

cat > base.json <<JSON
{"model": {"n_layers": 2, "d_model": 16, "n_heads": 2, "pos": "xpos"},
 "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 2, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON

# ---- generate: a cache under blocks or a window holds the text, not 2B or W keys ----
expect_rc 0 "an xpos run" "$BIN" train base.json --out x --quiet
expect_rc 0 "an alibi run" "$BIN" train base.json --out a --quiet --set model.pos=alibi
expect_rc 0 "xpos: blocks far longer than the text" "$BIN" generate x --blockwise 16000 --tokens 30 --context 5
expect_err "kv cache: 46 rows"   # 30 tokens fed + 16 rows of slack
expect_rc 0 "alibi: --blockwise 16777216" "$BIN" generate a --blockwise 16777216 --tokens 30 --context 5
expect_err "kv cache: 46 rows"
expect_rc 0 "alibi: --window 16777216" "$BIN" generate a --sinks 2 --window 16777216 --tokens 30 --temperature 0
expect_err "kv cache: 48 rows"   # and the 2 sinks' rows
cp out.txt win.txt
expect_rc 0 "alibi: full attention" "$BIN" generate a --tokens 30 --temperature 0
cmp -s out.txt win.txt && ok || bad "a window longer than the text is not full attention"
# eval --task's cache is one instance long: the same blocks were 2B keys there too
tiny_task_cfg task.json
expect_rc 0 "an xpos copy-task run" "$BIN" train task.json --out tk --quiet --set model.pos=xpos
expect_rc 0 "eval --task --blockwise 16000 (xpos)" "$BIN" eval tk --task --blockwise 16000 --sizes 2 --trials 2

# ---- numbers in decimal notation only ----
for f in "--window 0x10" "--blockwise 0X10" "--max-tokens 0x10" "--sinks 0x0" "--scale 0x1p4 --transform alibi_interp"; do
    expect_rc 2 "eval $f" "$BIN" eval a --lengths 16 $f
    expect_err "^stretch eval: error: ${f%% *} '"
done
expect_rc 2 "generate --temperature 0x1" "$BIN" generate a --temperature 0x1 --tokens 2
expect_err "^stretch generate: error: --temperature '0x1'"
expect_rc 0 "eval --window 1e1 (JSON reads it as 10 too)" "$BIN" eval a --lengths 16 --window 1e1

# ---- docs/evaluation.md: --lengths stops at 2^24, as eval.lengths ----
expect_rc 2 "eval --lengths 2^24 + 1" "$BIN" eval a --lengths 16777217
expect_err "^stretch eval: error: --lengths '16777217': expected integers in \[1, 16777216\]"
grep -q "may exceed the 2^24" "$SRC/docs/evaluation.md" && bad "docs/evaluation.md: --lengths 'may exceed the 2^24'" || ok

# ---- a latest pointer of 5000 bytes is damaged, not unreadable ----
cp -r a big_latest
head -c 5000 /dev/zero | tr '\0' a > big_latest/checkpoints/latest
expect_rc 5 "eval of a run whose latest is 5000 bytes" "$BIN" eval big_latest --lengths 16
expect_err "big_latest/checkpoints/latest: malformed checkpoint pointer: 5000 bytes"
expect_rc 5 "resume of the same" "$BIN" train --resume big_latest --quiet

# ---- --no-cache's warning: only when a forward passes --context ----
# (no prompt: the start token and 8 sampled ones; the 8th is never fed, so 8 tokens in all)
for f in "--blockwise 2" "--sinks 1 --window 3"; do
    expect_rc 0 "generate $f: 1 + 8 tokens at context 8 (cache)" "$BIN" generate a --tokens 8 --context 8 $f --temperature 0
    cp out.txt c.txt
    expect_rc 0 "generate $f: 1 + 8 tokens at context 8 (--no-cache)" "$BIN" generate a --tokens 8 --context 8 $f --temperature 0 --no-cache
    grep -q "will pass --context" err.txt && bad "$f: a text that fits --context is warned about: $(cat err.txt)" || ok
    cmp -s c.txt out.txt && ok || bad "$f: cache and --no-cache differ within --context"
    expect_rc 0 "generate $f: 1 + 9 tokens at context 8 (--no-cache)" "$BIN" generate a --tokens 9 --context 8 $f --no-cache
    expect_err "will pass --context 8"
done

# ---- a temperature below float's range is the T -> 0 limit ----
expect_rc 0 "generate greedy" "$BIN" generate a --tokens 20 --temperature 0
cp out.txt greedy.txt
for t in 1e-300 1e-46; do
    for k in 40 0; do
        expect_rc 0 "generate --temperature $t --top-k $k" "$BIN" generate a --tokens 20 --temperature $t --top-k $k --seed 3
        cmp -s out.txt greedy.txt && ok || bad "--temperature $t --top-k $k: $(cat out.txt), greedy: $(cat greedy.txt)"
    done
done

# ---- sinks past the text: as many rows as the text, full attention ----
expect_rc 0 "alibi: --sinks 16777216 --window 1" timeout 60 "$BIN" generate a --sinks 16777216 --window 1 --tokens 30 --temperature 0
expect_err "kv cache: 47 rows"   # 30 sinks, 1 window row, 16 of slack
cmp -s out.txt win.txt && ok || bad "sinks covering the text are not full attention"

# ---- standard output that cannot be written: exit 3, and generate stops ----
if [ -w /dev/full ]; then
    "$BIN" generate a --tokens 1000000 > /dev/full 2>err.txt; rc=$?
    [ $rc = 3 ] && ok || bad "generate > /dev/full: exit $rc, expected 3"
    expect_err "^stretch generate: error: standard output: cannot write the text: No space left on device"
    "$BIN" eval a --lengths 16 --quiet > /dev/full 2>err.txt; rc=$?
    [ $rc = 3 ] && ok || bad "eval > /dev/full: exit $rc, expected 3"
    expect_err "^stretch eval: error: standard output: write error"
    "$BIN" data --config task.json --show 2 > /dev/full 2>err.txt; rc=$?
    [ $rc = 3 ] && ok || bad "data --show > /dev/full: exit $rc, expected 3"
else
    skip "/dev/full is not writable here"
fi
"$BIN" generate a --tokens 3 >&- 2>err.txt; rc=$?
[ $rc = 3 ] && ok || bad "generate with standard output closed: exit $rc, expected 3"
expect_err "standard output: cannot write the text: Bad file descriptor"

# ---- an output path that is not a regular file is never replaced ----
mkfifo fifo && ln -s fifo fifolink && echo mine > target.json && ln -s target.json link.json
for p in fifo fifolink link.json; do
    expect_rc 3 "eval --json $p --force" "$BIN" eval a --lengths 16 --json $p --force
    expect_err "^stretch eval: error: --json $p: not a regular file"
done
expect_rc 3 "bench --json fifo --force" "$BIN" bench --preset tiny --steps 1 --no-eval --sgemm 0 --json fifo --force
expect_rc 3 "data --save-tokenizer link.json --force" "$BIN" data --source synthetic --save-tokenizer link.json --force
[ -p fifo ] && [ -L fifolink ] && [ -L link.json ] && [ "$(cat target.json)" = mine ] && ok ||
    bad "an output replaced a FIFO or a link: $(ls -l fifo fifolink link.json)"
# the same for the paths a command names itself: eval's default report (refused before
# evaluating) and an export's files (before any is written), and any writer's last check
rm -f a/eval_valid_nonoverlapping.json && ln -s ../target.json a/eval_valid_nonoverlapping.json
expect_rc 3 "eval with its default report a link" "$BIN" eval a --lengths 16
expect_err "a/eval_valid_nonoverlapping.json: not a regular file (a symbolic link)"
[ ! -s out.txt ] && [ -L a/eval_valid_nonoverlapping.json ] && ok || bad "eval evaluated, or replaced the link"
rm a/eval_valid_nonoverlapping.json
mkdir -p ex && ln -s ../target.json ex/config.json
expect_rc 3 "export --force over a link" "$BIN" export a --out ex --force
expect_err "ex/config.json: not a regular file (a symbolic link)"
[ ! -e ex/model.safetensors ] && ok || bad "export wrote model.safetensors before refusing config.json"
[ -L ex/config.json ] && [ "$(cat target.json)" = mine ] && ok || bad "a link or its target was replaced: $(ls -l ex)"

# ---- --force never removes a run's files it cannot replace ----
mkdir -p fx && cp a/config.json fx/config.json && cp base.json fx.json && echo '{"step": 1}' > fx/metrics.jsonl && echo x > fx/checkpoints
"$BIN" train fx.json --out fx --force --quiet >out.txt 2>err.txt; rc=$?
[ $rc = 3 ] && ok || bad "train --force over a checkpoints file: exit $rc, expected 3"
expect_err "fx/checkpoints: exists and is not a directory"
[ -f fx/config.json ] && [ -f fx/metrics.jsonl ] && ok || bad "train --force removed the run's files: $(ls fx)"

# ---- bench with nothing to measure ----
expect_rc 2 "bench with nothing to measure" "$BIN" bench --preset tiny --steps 0 --no-eval --sgemm 0
expect_err "nothing to measure"
expect_rc 0 "bench: decoding alone is a figure" "$BIN" bench --preset tiny --no-train --no-eval --sgemm 0 --decode 3

# ---- --stop-after at or below the step a run has reached ----
expect_rc 0 "a 4-step run" "$BIN" train base.json --out sa --quiet --set train.steps=4
expect_rc 0 "resume with --stop-after 2" "$BIN" train --resume sa --stop-after 2 --set train.steps=6
expect_err "warning: --stop-after 2: the run is at step 4 already; nothing to train"

finish cli_probe6
