#!/usr/bin/env bash
# cli_overwrite.sh - outputs never replace what is not theirs, inputs never hang, and the
# JSON reader is as strict as RFC 8259 (found by a black-box probe of the CLI):
#   fifo       a FIFO in place of a run's checkpoints/latest, config.json or metrics.jsonl,
#              or given as CONFIG / SWEEP: refused ("not a regular file", exit 3) for eval,
#              generate, export, resume, train and sweep instead of blocking for ever
#   reports    eval --json, eval --task --json, bench --json and data --save-tokenizer
#              refuse an existing file (a run's config.json, a user's notes) without
#              --force and replace it with --force; a directory is refused either way
#   export     an existing tokenizer.json in --out is not replaced without --force; --out
#              naming a file is refused by its name, not by a temporary file's
#   sweep      a sweep's out directory holding a results.md no sweep wrote is refused;
#              a sweep run twice into the same directory still rewrites its own tables
#   json       "01", "-01", "4.", "1.e3", \u0000 and raw control characters in strings:
#              exit 2 with line and column (a file) or read as a string (--set); a seed
#              above 2^53 - 1 (2^53 + 1 reads as 2^53) is out of range
#   resume     --set train.steps below the step the run reached: exit 2, config.json
#              unchanged; the summary of a resume with nothing to do shows no loss
#   ckptdir    no output goes into a run's checkpoints/ (an eval --json over its latest
#              step_N.ckpt with --force broke --resume): export/train/extend/sweep --out,
#              eval --json and data --save-tokenizer there are refused (exit 3), the run
#              resumes; the run directory itself still takes reports
# Every refusal leaves the files it names byte-identical (md5 before and after).
. "$(dirname "$0")/lib_cli.sh" cli_overwrite
TO=60
# run_to CODE WHAT CMD...: expect_rc under a timeout (124 = a hang)
run_to() { local want=$1 what=$2; shift 2; expect_rc "$want" "$what" timeout -k 5 "$TO" "$@"; }
same() { [ "$(md5sum <"$1")" = "$2" ] && ok || bad "$3: $1 changed"; }
sum() { md5sum <"$1"; }

tiny_synthetic_cfg tiny.json
expect_rc 0 "tiny run" "$BIN" train tiny.json --out run --quiet
[ -s run/checkpoints/latest ] || { bad "tiny run wrote no checkpoint"; finish cli_overwrite; }

# ---- fifo ----
cp -r run rF; rm rF/checkpoints/latest; mkfifo rF/checkpoints/latest
run_to 3 "eval, latest a FIFO" "$BIN" eval rF --lengths 16 --quiet;  expect_err "rF/checkpoints/latest: not a regular file"
run_to 3 "generate, latest a FIFO" "$BIN" generate rF --tokens 2;    expect_err "not a regular file"
run_to 3 "export, latest a FIFO" "$BIN" export rF --out xF;          expect_err "not a regular file"
run_to 3 "resume, latest a FIFO" "$BIN" train --resume rF --quiet;   expect_err "not a regular file"
cp -r run rG; rm rG/config.json; mkfifo rG/config.json
run_to 3 "resume, config.json a FIFO" "$BIN" train --resume rG --quiet; expect_err "rG/config.json: not a regular file"
cp -r run rM; rm rM/metrics.jsonl; mkfifo rM/metrics.jsonl
run_to 3 "resume, metrics.jsonl a FIFO" "$BIN" train --resume rM --set train.steps=4 --quiet
expect_err "rM/metrics.jsonl: not a regular file"
mkdir cfgdir
run_to 3 "a directory as CONFIG" "$BIN" train cfgdir --out rD --quiet; expect_err "cfgdir: is a directory"
mkfifo fifo.json
run_to 3 "a FIFO as CONFIG" "$BIN" train fifo.json --out rP --quiet; expect_err "fifo.json: not a regular file"
run_to 3 "a FIFO as SWEEP" "$BIN" sweep fifo.json --quiet;           expect_err "fifo.json: not a regular file"

# ---- reports ----
c0=$(sum run/config.json)
run_to 3 "eval --json onto config.json" "$BIN" eval run --lengths 16 --quiet --json run/config.json
expect_err "--json run/config.json: the file exists"; same run/config.json "$c0" "eval --json"
echo "my notes" > notes.txt; n0=$(sum notes.txt)
run_to 3 "data --save-tokenizer onto notes" "$BIN" data --source synthetic --syn-tokens 100,100,100 --save-tokenizer notes.txt
expect_err "--save-tokenizer notes.txt: the file exists"; same notes.txt "$n0" "data --save-tokenizer"
run_to 3 "bench --json onto notes" "$BIN" bench --preset tiny --steps 1 --eval none --sgemm 0 --threads 1 --json notes.txt
expect_err "--json notes.txt"; same notes.txt "$n0" "bench --json"
run_to 3 "eval --json a directory" "$BIN" eval run --lengths 16 --quiet --json cfgdir --force; expect_err "cfgdir: is a directory"
run_to 0 "eval --json new file" "$BIN" eval run --lengths 16 --quiet --json e.json
run_to 3 "eval --json again" "$BIN" eval run --lengths 16 --quiet --json e.json; expect_err "--force"
run_to 0 "eval --json --force" "$BIN" eval run --lengths 16 --quiet --json e.json --force
"$PY" -c "import json; json.load(open('e.json'))['results']" 2>/dev/null && ok || bad "e.json is not an eval report after --force"
run_to 0 "data --save-tokenizer --force" "$BIN" data --source synthetic --syn-tokens 100,100,100 --save-tokenizer notes.txt --force
[ "$(sum notes.txt)" != "$n0" ] && ok || bad "--force did not replace notes.txt"
tiny_task_cfg task.json
if "$BIN" train task.json --out trun --quiet >/dev/null 2>&1; then
    echo keep > keep.json; k0=$(sum keep.json)
    run_to 3 "eval --task --json onto a file" "$BIN" eval trun --task --sizes 2 --trials 2 --quiet --json keep.json
    expect_err "--json keep.json: the file exists"; same keep.json "$k0" "eval --task --json"
    run_to 0 "eval --task --json --force" "$BIN" eval trun --task --sizes 2 --trials 2 --quiet --json keep.json --force
else
    bad "the copy-task run did not train: $(cat err.txt)"
fi

# ---- export ----
mkdir -p exp && echo mine > exp/tokenizer.json; t0=$(sum exp/tokenizer.json)
run_to 3 "export over a tokenizer.json" "$BIN" export run --out exp; expect_err "exp/tokenizer.json: already exists"
same exp/tokenizer.json "$t0" "export"
[ ! -e exp/model.safetensors ] && ok || bad "export wrote model.safetensors before refusing"
echo hi > plainfile
run_to 3 "export --out a file" "$BIN" export run --out plainfile; expect_err "--out plainfile: exists and is not a directory"
grep -q "\.tmp\." err.txt && bad "a temporary file name in the message: $(cat err.txt)" || ok
# a report's missing directory is made (as train --out's is), before the evaluation runs;
# one that cannot be (a file in the way) is refused before it runs, not after
run_to 0 "eval --json in a missing dir" "$BIN" eval run --lengths 16 --quiet --json nodir/sub/r.json
[ -s nodir/sub/r.json ] && ok || bad "eval --json nodir/sub/r.json wrote no report"
run_to 3 "eval --json under a file" "$BIN" eval run --lengths 16 --json plainfile/r.json
expect_err "--json plainfile/r.json: cannot create: plainfile is not a directory"
grep -q "length" out.txt && bad "eval ran before refusing its --json path: $(cat out.txt)" || ok
grep -q "\.tmp\." err.txt && bad "temporary name: $(cat err.txt)" || ok
run_to 3 "bench --json under a file" "$BIN" bench --preset tiny --json plainfile/b.json
expect_err "--json plainfile/b.json: cannot create: plainfile is not a directory"
run_to 0 "export --out with missing parents" "$BIN" export run --out deep/er/exp
[ -s deep/er/exp/model.safetensors ] && [ -s deep/er/exp/config.json ] && ok || bad "export into deep/er/exp"
run_to 3 "export --out under a file" "$BIN" export run --out plainfile/exp
expect_err "plainfile/exp: cannot create directory: Not a directory"

# ---- sweep ----
cp tiny.json base.json
printf '{"base": "base.json", "variants": [{"name": "a", "model.pos": "alibi"}], "eval": {"lengths": [16]}, "out": "sw"}' > sw.json
mkdir mydir && echo "my results" > mydir/results.md && echo "my csv" > mydir/results.csv
m0=$(sum mydir/results.md); m1=$(sum mydir/results.csv)
run_to 3 "sweep into a dir with a user's results.md" "$BIN" sweep sw.json --out mydir --quiet
expect_err "mydir: the sweep's output directory holds results.csv, which no sweep wrote"
same mydir/results.md "$m0" "sweep"; same mydir/results.csv "$m1" "sweep"
[ ! -e mydir/a ] && ok || bad "sweep trained before refusing"
run_to 0 "sweep" "$BIN" sweep sw.json --quiet
run_to 0 "sweep again (its own tables)" "$BIN" sweep sw.json --quiet
[ -s sw/results.md ] && ok || bad "sweep wrote no results.md"

# ---- json ----
cfg_bad() {   # cfg_bad WHAT 'TRAIN-SECTION JSON FRAGMENT' 'MESSAGE'
    printf '{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "rope"}, "data": {"synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},\n "train": {%s}}' "$2" > j.json
    run_to 2 "$1" "$BIN" train j.json --out rj --quiet; expect_err "$3"
    [ ! -e rj ] && ok || bad "$1: a run directory was created"
}
cfg_bad "leading zero" '"steps": 01' "j.json: invalid JSON at line 2, column 21 (byte 159): a number with a leading zero"
cfg_bad "negative leading zero" '"seed": -01' "a number with a leading zero"
cfg_bad "bare dot" '"steps": 4.' "a number with no digit after its '.'"
cfg_bad "bare dot, exponent" '"max_seconds": 1.e3' "a number with no digit after its '.'"
cfg_bad "\\u0000 in a value" '"precision": "fp32\u0000x"' "\\u0000 inside a string"
cfg_bad "\\u0000 in a key" '"steps\u0000zz": 2' "\\u0000 inside a string"
cfg_bad "raw tab in a string" "$(printf '"precision": "fp\t32"')" "a control character inside a string"
cfg_bad "seed 2^53 + 1" '"seed": 9007199254740993' "train.seed: must be in .0, 2^53 - 1."
# bytes that are not UTF-8 pass inside a string (file names are bytes; a run's config.json
# holds its data.path as it is): on to the key's own check
cfg_bad "Latin-1 bytes in a string" "$(printf '"precision": "fp\37732"')" "train.precision"
cfg_bad "nested past cJSON's limit" "\"x\": $(printf '[%.0s' $(seq 1001))$(printf ']%.0s' $(seq 1001)), \"steps\": 2" \
    "nested deeper than 1000 levels"
printf '{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2}, "data": {"synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}}, "train": {"steps": 1, "batch_size": 2, "seq_len": 16, "eval_batches": 1, "seed": 2e-05}}' > ok.json
run_to 2 "an exponent with leading zeros is a number (seed 2e-05 is no integer)" "$BIN" train ok.json --out rok --quiet
expect_err "train.seed"
run_to 2 "--set 01 is the string \"01\"" "$BIN" train tiny.json --out rs1 --quiet --set train.steps=01; expect_err "--set train.steps"
run_to 2 "--set a \\u0000 string" "$BIN" train tiny.json --out rs2 --quiet --set 'model.pos="rope\u0000x"'; expect_err "--set model.pos"
run_to 0 "--set 1e-05 is a number" "$BIN" train tiny.json --out rs3 --quiet --set train.optimizer.lr=1e-05

# ---- resume ----
cp -r run rS; c0=$(sum rS/config.json); l0=$(sum rS/checkpoints/latest)
run_to 2 "resume below the reached step" "$BIN" train --resume rS --set train.steps=1 --quiet
expect_err "resuming with train.steps 1, below the step the run reached (2"
same rS/config.json "$c0" "resume with fewer steps"; same rS/checkpoints/latest "$l0" "resume with fewer steps"
run_to 2 "resume with a --set of a model key" "$BIN" train --resume rS --set model.n_layers=3 --quiet
expect_err "^stretch train: error: --set model.n_layers=3: a resumed run keeps its checkpoint's model and data sections"
same rS/config.json "$c0" "resume with a model --set"
run_to 0 "resume with nothing to do" "$BIN" train --resume rS
grep -q "nothing to do" err.txt out.txt && ok || bad "no 'nothing to do' line"
grep -h "done: step 2" err.txt out.txt | grep -q "loss 0.0000" && bad "the summary shows a loss no step computed" || ok

# probe 28: a run dir whose checkpoints/ is gone (or that holds only a config.json) trains
# from step 0 and saves its checkpoints, instead of failing at the first one
mkdir rN && cp tiny.json rN/config.json
run_to 0 "resume a directory holding only config.json" "$BIN" train --resume rN --quiet
[ -s rN/checkpoints/latest ] && ok || bad "no checkpoint after resuming a config-only directory"
cp -r run rC && rm -rf rC/checkpoints
run_to 0 "resume a run without checkpoints/" "$BIN" train --resume rC --quiet
[ -s rC/checkpoints/latest ] && ok || bad "no checkpoint after resuming a run without checkpoints/"
# the experiment's config as --out's config.json: refused, even with --force, file kept
mkdir rX && cp tiny.json rX/config.json; cX=$(sum rX/config.json)
run_to 2 "config inside its own --out" "$BIN" train rX/config.json --out rX --force --quiet
expect_err "rX/config.json is the config.json of the run directory rX"
same rX/config.json "$cX" "train --force with the config inside --out"

# ---- ckptdir ----
expect_rc 0 "a run for ckptdir" "$BIN" train tiny.json --out rK --quiet --set train.steps=4 --set train.checkpoint_every=2
ck=rK/checkpoints/$(cat rK/checkpoints/latest); k0=$(sum "$ck")
run_to 3 "eval --json over the latest checkpoint, --force" "$BIN" eval rK --lengths 16 --quiet --json "$ck" --force
expect_err "^stretch eval: error: --json $ck: lies in .*/rK/checkpoints, a run's checkpoint directory"
same "$ck" "$k0" "eval --json over a checkpoint"
run_to 3 "export into checkpoints/" "$BIN" export rK --out rK/checkpoints/x;  expect_err "--out rK/checkpoints/x: lies in"
run_to 3 "export as checkpoints/" "$BIN" export rK --out rK/checkpoints;      expect_err "--out rK/checkpoints: lies in"
run_to 3 "train -o into checkpoints/" "$BIN" train tiny.json -o rK/checkpoints/sub --quiet; expect_err "-o rK/checkpoints/sub: lies in"
run_to 3 "extend into checkpoints/" "$BIN" extend rK --to 32 --steps 1 --out rK/checkpoints/e --quiet; expect_err "lies in"
run_to 3 "sweep into checkpoints/" "$BIN" sweep x.json --out rK/checkpoints/s --quiet; expect_err "--out rK/checkpoints/s: lies in"
run_to 3 "data --save-tokenizer into checkpoints/" "$BIN" data --source synthetic --save-tokenizer rK/checkpoints/t.json
expect_err "--save-tokenizer rK/checkpoints/t.json: lies in"
(cd rK/checkpoints && "$BIN" eval .. --lengths 16 --quiet --json ./e.json >/dev/null 2>../../err.txt); [ $? = 3 ] && ok || bad "eval --json ./e.json from inside checkpoints/ was let through"
[ "$(ls rK/checkpoints | grep -vc -E '^(step_[0-9]+\.ckpt|best\.ckpt|latest)$')" = 0 ] && ok || bad "something was written into rK/checkpoints: $(ls rK/checkpoints)"
run_to 0 "resume after the refusals" "$BIN" train --resume rK --set train.steps=6 --quiet
run_to 0 "a report in the run directory itself" "$BIN" eval rK --lengths 16 --quiet --json rK/mine.json

finish cli_overwrite
