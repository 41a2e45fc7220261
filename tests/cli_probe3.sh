#!/usr/bin/env bash
# cli_probe3.sh - the third probe's findings (tasks, passkey, export, generate):
#   - a checkpoint kept outside RUN/checkpoints/ finds the tokenizer.json beside it, never
#     one two directories up; export and generate of a text run whose tokenizer is missing
#     say so (a warning naming the path) instead of going on silently;
#   - eval --task exits as eval does: 0 when at least one cell was evaluated (a note counts
#     the rest), else the first cell's code (2: past a learned table's max_len);
#   - task reports carry eval's "model" object, with a trained scaling ("alibi_interp2");
#   - the default scales of eval --task keep the sizes the task can make (MQAR with 64
#     symbols: at most 32 pairs), instead of refusing the whole evaluation over --scales.
. "$(dirname "$0")/lib_cli.sh" cli_probe3

# ---- the tokenizer of a loose checkpoint ----
tiny_text_run rope
expect_rc 0 "train a byte run" "$BIN" train cfg.json --out r --quiet
mkdir -p keep/m && cp r/checkpoints/step_00000020.ckpt keep/m/model.ckpt && cp r/tokenizer.json keep/m/
echo '{"version": 1, "kind": "broken"}' > keep/tokenizer.json    # a stranger's file two levels up
head -c 2000 corpus.txt > s.txt
expect_rc 0 "eval --data of a loose checkpoint" "$BIN" eval keep/m/model.ckpt --data s.txt --lengths 32 --quiet
expect_rc 0 "generate from a loose checkpoint" "$BIN" generate keep/m/model.ckpt --prompt "the quick" --tokens 20 --seed 1
grep -q "^the quick" out.txt && ok || bad "generate from a loose checkpoint did not decode its text: $(head -c 80 out.txt)"
expect_rc 0 "export of a loose checkpoint" "$BIN" export keep/m/model.ckpt --out ex
cmp -s ex/tokenizer.json r/tokenizer.json && ok || bad "the export's tokenizer.json is not the run's"
rm keep/m/tokenizer.json keep/tokenizer.json
expect_rc 0 "export without the tokenizer" "$BIN" export keep/m/model.ckpt --out ex2
expect_err "keep/m/tokenizer.json not found"
expect_rc 0 "generate without the tokenizer" "$BIN" generate keep/m/model.ckpt --tokens 5 --seed 1
expect_err "token ids are printed"

# ---- eval --task exit codes ----
tiny_task_cfg task.json
expect_rc 0 "train a learned-position copy run" "$BIN" train task.json --out L --quiet --set model.pos=learned \
    --set model.max_len=32
expect_rc 0 "eval --task, a good report" "$BIN" eval L --task --sizes 2 --trials 2 --quiet
cp L/eval_task_copy.json good.json
expect_rc 2 "eval --task, every size past max_len" "$BIN" eval L --task --sizes 100,200 --trials 2 --quiet
expect_err "none of the 2 cells could be evaluated"
# the default report is not replaced by one of errors (probe 44); a --json file is written
expect_err "no cell evaluated: L/eval_task_copy.json not written (an earlier report stays)"
expect_err "none of the 2 cells could be evaluated (--json FILE writes a report"
cmp -s good.json L/eval_task_copy.json && ok || bad "an eval of no cell replaced the earlier report"
expect_rc 2 "eval --task, every size past max_len, --json" "$BIN" eval L --task --sizes 100,200 --trials 2 --quiet \
    --json none.json
grep -q '"error"' none.json && ok || bad "--json of an eval of no cell: no error rows"
expect_rc 0 "eval --task, one size past max_len" "$BIN" eval L --task --sizes 2,100 --trials 2 --quiet --json l2.json
expect_err "1 of 2 cells could not be evaluated"

# ---- the trained scaling is in the task report, as in eval's ----
expect_rc 0 "train a copy run" "$BIN" train task.json --out base --quiet
expect_rc 0 "extend it with alibi_interp, 0 steps" "$BIN" extend base --to 64 --transform alibi_interp --steps 0 \
    --out ext --quiet
expect_rc 0 "eval --task of the extended run" "$BIN" eval ext --task --scales 1,2 --trials 2 --quiet
"$PY" -c "import json; m = json.load(open('ext/eval_task_copy.json'))['model']; assert m['scaling'] == 'alibi_interp2' and m['pos'] == 'alibi', m" \
    && ok || bad "the task report does not record the trained scaling: $(head -c 300 ext/eval_task_copy.json)"

# ---- default scales the task cannot make ----
cat > mqar.json <<'EOF'
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "task", "task": {"name": "mqar", "min_size": 1, "max_size": 4, "symbols": 64}},
 "train": {"batch_size": 4, "seq_len": 64, "steps": 2, "eval_batches": 1, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
EOF
expect_rc 0 "train an MQAR run" "$BIN" train mqar.json --out M --quiet
expect_rc 0 "eval --task with the default scales" "$BIN" eval M --task --trials 2
expect_err "default scale 16x left out"
"$PY" -c "import json; r = json.load(open('M/eval_task_mqar.json'))['results']; assert [x['size'] for x in r] == [4, 8, 16, 32], r" \
    && ok || bad "the default-scale report does not hold sizes 4..32"
finish cli_probe3
