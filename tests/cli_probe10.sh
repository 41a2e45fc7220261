#!/usr/bin/env bash
# cli_probe10.sh - the findings of the tenth round of black-box probes (files and failures:
# interruptions, a full or read-only disk, odd paths, determinism) that are not checked
# beside their feature's own tests:
#   - temp files of writers that died outside a run directory stayed for good: a Ctrl-C
#     while a training still loaded its data (no handler yet) or a SIGKILL of `stretch
#     data`, `export` or `eval --json` left PATH.tmp.PID.NONCE beside a token cache, an
#     export or a report (a partial cache or model: up to its whole size); only --resume
#     and --force cleaned, and only in run directories. The next writer of PATH removes
#     the regular files PATH.tmp.PID[.NONCE] of dead PIDs now (never a live PID's, a user's
#     "PATH.tmp.notes" or a directory), and says so.
#   - a report on a read-only file system (root passes access()): eval RUN's default
#     report, eval --task's, and eval --json FILE --force over an existing FILE evaluated
#     every length, then failed (exit 3, the report lost); refused before evaluating now,
#     naming --json. Reading a read-only run into a writable --json still works.
#   - a file replaced atomically took mode 0644 whatever it had: a run made private
#     (chmod 600 config.json) had its config.json, metrics.jsonl and latest rewritten
#     world-readable on --resume; the replacement keeps the old file's mode now.
#   - extend (or train with train.init_from) that failed after init_from.json and before
#     config.json (a full disk: "config.json: write failed") left the directory holding
#     init_from.json: the same command again was refused ("not empty (holds
#     'init_from.json')", use --force) and `train --resume` advised `stretch train CONFIG
#     --out DIR`, which an extension has not. Such a pin counts as a leftover now (removed
#     when the start begins again), and --resume names the extend command.
#   - the commands a message says to run named the run directory unquoted: "continue it
#     with stretch train --resume a b/run" pasted into bash resumed "a"; such a path is
#     one shell word now ('a b/run'; the interruption's "continue with:" is the trainer's).
# The read-only part mounts in a private mount namespace (unshare -m as root, unshare -rm
# otherwise) and is skipped (exit 77) where that is not permitted.
. "$(dirname "$0")/lib_cli.sh" cli_probe10

# a PID no process has now (a finished child's)
sh -c 'exit 0' &
wait $!
DEAD=$!
kill -0 "$DEAD" 2>/dev/null && { skip "PID $DEAD was taken again at once"; finish cli_probe10; }
LIVE=$$

# ---- dead writers' temp files beside a token cache ----
big_vocab_cfg words.json
DATA=(data --source text --path words.txt --tokenizer word --cache-dir cache)
expect_rc 0 "data builds the word caches" "$BIN" "${DATA[@]}"
train_cache=$(ls cache/*.train.word.tokens 2>/dev/null | head -1)
[ -n "$train_cache" ] && ok || bad "no train cache in cache/: $(ls cache)"
rm -f cache/*
head -c 100000 /dev/zero > "$train_cache.tmp.$DEAD.abc123"    # a killed writer's partial file
head -c 1000 /dev/zero > "$train_cache.tmp.$DEAD"              # st_link_atomic's name
touch "$train_cache.tmp.$LIVE.def456" "$train_cache.tmp.notes"  # a live writer's, a user's
mkdir "$train_cache.tmp.$DEAD.dir"                             # no regular file
expect_rc 0 "data rebuilds the caches" "$BIN" "${DATA[@]}"
[ ! -e "$train_cache.tmp.$DEAD.abc123" ] && [ ! -e "$train_cache.tmp.$DEAD" ] && ok \
    || bad "a dead writer's temp files beside the cache stayed: $(ls cache | tr '\n' ' ')"
expect_err "removed 2 temp file(s) left by interrupted writes"
[ -e "$train_cache.tmp.$LIVE.def456" ] && [ -e "$train_cache.tmp.notes" ] && [ -d "$train_cache.tmp.$DEAD.dir" ] && ok \
    || bad "a live writer's temp file, a user's file or a directory was removed: $(ls cache | tr '\n' ' ')"
[ -s "$train_cache" ] && ok || bad "the cache was not written"

# ---- ... beside an export and a report ----
tiny_synthetic_cfg syn.json
expect_rc 0 "train the tiny run" "$BIN" train syn.json --out r --quiet
mkdir ex
head -c 100000 /dev/zero > "ex/model.safetensors.tmp.$DEAD.0a0b0c"
touch "ex/config.json.tmp.$DEAD.0d0e0f" "ex/tokenizer.json.tmp.$LIVE.aaaaaa"
expect_rc 0 "export into a directory holding a dead export's temp files" "$BIN" export r --out ex
left=$(ls ex | grep -c "\.tmp\.$DEAD")
[ "$left" = 0 ] && ok || bad "export left $left dead temp file(s): $(ls ex | tr '\n' ' ')"
[ -e "ex/tokenizer.json.tmp.$LIVE.aaaaaa" ] && ok || bad "export removed a live writer's temp file"
touch "rep.json.tmp.$DEAD.123abc"
expect_rc 0 "eval --json beside a dead writer's temp file" "$BIN" eval r --lengths 16 --json rep.json --quiet
[ ! -e "rep.json.tmp.$DEAD.123abc" ] && ok || bad "eval --json left the dead writer's temp file"

# ---- a replaced file keeps its permissions ----
expect_rc 0 "train a run to make private" "$BIN" train syn.json --out priv --quiet --set train.steps=2
chmod 600 priv/config.json priv/metrics.jsonl priv/checkpoints/latest
expect_rc 0 "resume the private run" "$BIN" train --resume priv --quiet --set train.steps=4
modes=$(stat -c %a priv/config.json priv/metrics.jsonl priv/checkpoints/latest | tr '\n' ' ')
[ "$modes" = "600 600 600 " ] && ok || bad "files the resume replaced lost their mode 600: $modes"

# ---- a start that died between init_from.json and config.json ----
# (a full disk at config.json, a Ctrl-C during the setup: extend and train.init_from pin the
# weights they start from in init_from.json first)
expect_rc 0 "extend the tiny run" "$BIN" extend r --to 32 --steps 2 --out ext --quiet
mkdir -p half/checkpoints
cp ext/init_from.json half/
expect_rc 3 "train --resume of the half-made extension" "$BIN" train --resume half --quiet
expect_err "or the stretch extend command that made it"
expect_rc 0 "the same extend again into it" "$BIN" extend r --to 32 --steps 2 --out half --quiet
[ -f half/config.json ] && [ -f half/checkpoints/latest ] && ok || bad "the extension did not train: $(ls half)"
mkdir -p userdir && cp ext/init_from.json userdir/ && echo notes > userdir/notes.txt
expect_rc 3 "a directory holding init_from.json and a user's file" "$BIN" extend r --to 32 --steps 2 --out userdir --quiet
expect_err "directory is not empty"

# ---- a path the shell splits, in a command the message says to run ----
d="a b/it's ü"
expect_rc 0 "train into a path with a space, a quote and UTF-8" "$BIN" train syn.json --out "$d" --quiet
expect_rc 3 "train into it again" "$BIN" train syn.json --out "$d" --quiet
cmd=$(sed -n "s/.*continue it with \(stretch train --resume .*\), replace it.*/\1/p" err.txt)
[ "$cmd" = "stretch train --resume 'a b/it'\\''s ü'" ] && ok || bad "the advice's path is not one shell word: $cmd"
expect_rc 0 "the advised command, pasted into bash" bash -c "\"\$0\" ${cmd#stretch } --quiet" "$BIN"
# the trainer's own "continue with:" (here after train.max_seconds; SIGINT's is the same)
expect_rc 0 "a run that stops at its time limit" "$BIN" train syn.json --out "$d/timed" --set train.max_seconds=1e-9 \
    --set train.steps=1000
grep -qF "continue with: stretch train --resume 'a b/it'\\''s ü/timed'" err.txt && ok \
    || bad "the time limit's advice: $(grep 'continue with' err.txt)"
expect_rc 2 "train --resume with --force" "$BIN" train --resume "$d" --force
grep -qF "give the CONFIG with --out 'a b/it'\\''s ü' --force" err.txt && ok || bad "the --force advice: $(cat err.txt)"

# ---- reports on a read-only file system ----
if [ "$(id -u)" = 0 ]; then ns=(unshare -m); else ns=(unshare -rm); fi
mkdir -p src ro
if ! command -v unshare >/dev/null || ! "${ns[@]}" sh -c 'mount --bind src ro && mount -o remount,bind,ro ro' 2>/dev/null; then
    skip "a read-only bind mount is not permitted here (${ns[*]} mount -o remount,bind,ro)"
    finish cli_probe10
fi
tiny_task_cfg task.json
expect_rc 0 "train the task run" "$BIN" train task.json --out src/task --quiet
cp -r r src/run
echo '{"old": 1}' > src/old.json
cat > inside.sh <<'EOF'
# in the private mount namespace: each case's exit code and output in files under $OUT
set -u
mount --bind src ro && mount -o remount,bind,ro ro || exit 99
run() { local name=$1; shift; "$BIN" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; echo $? > "$OUT/$name.rc"; }
run default eval ro/run --lengths 16,32
run force eval ro/run --lengths 16 --json ro/old.json --force
run task eval ro/task --task --sizes 2 --trials 2
run elsewhere eval ro/run --lengths 16 --json "$OUT/fine.json"
EOF
mkdir res
BIN=$BIN OUT=$T/res "${ns[@]}" bash inside.sh; rc=$?
[ "$rc" = 0 ] && ok || bad "the read-only mount failed inside the namespace (exit $rc)"
for c in default force task; do
    [ "$(cat res/$c.rc)" = 3 ] && ok || bad "$c: exit $(cat res/$c.rc), expected 3: $(cat res/$c.err)"
    [ ! -s res/$c.out ] && ok || bad "$c: evaluated before refusing its report: $(head -3 res/$c.out)"
done
grep -q "ro/run/eval_valid_nonoverlapping.json: cannot create: Read-only file system.*--json OUT.json" res/default.err \
    && ok || bad "the default report's refusal: $(cat res/default.err)"
grep -q "ro/task/eval_task_copy.json: cannot create: Read-only file system.*--json OUT.json" res/task.err \
    && ok || bad "eval --task's refusal: $(cat res/task.err)"
grep -q -- "--json ro/old.json: cannot create: Read-only file system" res/force.err \
    && ok || bad "--json --force's refusal: $(cat res/force.err)"
[ "$(cat res/elsewhere.rc)" = 0 ] && "$PY" -c "import json, sys; json.load(open(sys.argv[1]))" res/fine.json && ok \
    || bad "a read-only run into a writable --json: exit $(cat res/elsewhere.rc): $(cat res/elsewhere.err)"
[ "$(cat src/old.json)" = '{"old": 1}' ] && ok || bad "old.json changed"

finish cli_probe10
