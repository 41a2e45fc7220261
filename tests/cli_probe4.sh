#!/usr/bin/env bash
# cli_probe4.sh - the findings of the fourth round of black-box probes (data pipeline,
# sweeps, scripts) that are not checked beside their feature's own tests:
#   - a resume puts back RUN/tokenizer.json when it is missing, damaged or another run's
#     (eval and generate read it); a dataset whose tokenizer no longer matches the
#     checkpoint's is a data error (exit 4, as eval says) and leaves tokenizer.json alone;
#   - a sweep evaluates a point again when the eval keys its runs take from the base
#     config or "set" change (the marker's plan covered the sweep's eval section and
#     the variants' keys only);
#   - a sweep keeps seeds up to 2^53 - 1 exact (run names, config.json, reports; cJSON
#     printed 15 digits and two seeds shared one name);
#   - results_tables.py and plot.py never average runs of two sweeps (other out dirs) or
#     eval reports of two models (the label says what differs);
#   - --quiet silences the data loader's info lines too (and so the ranks after the first);
#   - a train.steps 0 baseline's validation loss makes it best.ckpt; a resume refuses another
#     train.init_from; a start from a safetensors export writes init_from.json;
#   - a resume on a byte-level corpus that changed warns (checkpoint version 2 records a
#     hash of the data's tokens);
#   - the config-combination probe's edges: extend of a run with a scaling and train_len 0
#     (scale "inf") or an inv_sqrt schedule (--steps 0 refused), dropout 0.99 (the float's
#     own bound), the passkey filler's branching, eval.max_tokens 1, eval messages that blame
#     flags for the run's stored eval keys, --transform that inherited another's scale;
#   - a float key's value reads as typed in a range error ("got 0.6"), and the
#     valid_frac + test_frac rule shows both terms.
. "$(dirname "$0")/lib_cli.sh" cli_probe4

# ---- resume and the run's tokenizer ----
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > corpus.txt
cat > bpe.json <<JSON
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "text", "path": "$T/corpus.txt", "tokenizer": "bpe", "bpe_vocab": 280, "valid_frac": 0.1,
          "test_frac": 0.1, "cache_dir": "$T/cache"},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 8, "eval_batches": 1, "checkpoint_every": 2, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON
expect_rc 0 "a BPE run, stopped" "$BIN" train bpe.json --out r --quiet --stop-after 2
cp r/tokenizer.json tok.orig
rm r/tokenizer.json
expect_rc 0 "resume without tokenizer.json" "$BIN" train --resume r --quiet --stop-after 4
expect_err "r/tokenizer.json: cannot open"
cmp -s tok.orig r/tokenizer.json && ok || bad "the resume did not put tokenizer.json back"
echo '{"version": 1, "kind": "broken"}' > r/tokenizer.json
expect_rc 0 "resume with a damaged tokenizer.json" "$BIN" train --resume r --quiet --stop-after 6
expect_err "writing the run's tokenizer again"
cmp -s tok.orig r/tokenizer.json && ok || bad "the resume did not replace a damaged tokenizer.json"
expect_rc 0 "generate after the resumes" "$BIN" generate r --prompt "the quick" --tokens 4 --seed 1
# the corpus changes so that BPE learns other merges: the checkpoint's tokenizer is not
# the dataset's any more
sed -i 's/the/xqz/g' corpus.txt
expect_rc 4 "resume on a corpus with another tokenizer" "$BIN" train --resume r --quiet
expect_err "trained with a different tokenizer"
cmp -s tok.orig r/tokenizer.json && ok || bad "a refused resume changed tokenizer.json"
expect_rc 4 "eval of the same" "$BIN" eval r --quiet --json ev.json
rm -f ev.json

# ---- a sweep whose runs' own eval keys change (in "set" or the base config) ----
tiny_synthetic_cfg base.json
cat > sw.json <<'JSON'
{"base": "base.json", "set": {"train.steps": 2},
 "variants": [{"name": "alibi", "model.pos": "alibi"}], "eval": {"lengths": [16]}, "out": "sw"}
JSON
expect_rc 0 "sweep" "$BIN" sweep sw.json --quiet
sed -i 's/"train.steps": 2}/"train.steps": 2, "eval.split": "test", "eval.buckets": 2}/' sw.json
expect_rc 0 "sweep, set's eval keys edited" "$BIN" sweep sw.json
expect_err "alibi: the eval plan changed, evaluating again"
"$PY" -c "
import json, sys
r = json.load(open('sw/results.json'))['runs'][0]
rep = json.load(open('sw/alibi/sweep_done.json'))['report']
sys.exit(0 if rep['split'] == 'test' and len(rep['results'][0]['buckets']) == 2 else 1)
" && ok || bad "the re-run sweep kept the old evaluation"
expect_rc 0 "sweep, unchanged" "$BIN" sweep sw.json
expect_err "alibi: finished earlier, skipped"
python3 - <<'PYEOF'
import json
c = json.load(open("base.json")); c["eval"] = {"mode": "sliding", "stride": 8}; json.dump(c, open("base.json", "w"))
PYEOF
expect_rc 0 "sweep, base's eval keys edited" "$BIN" sweep sw.json
expect_err "alibi: the eval plan changed, evaluating again"
[ -f sw/alibi/eval_test_sliding.json ] && ok || bad "the base's eval.mode was not evaluated: $(ls sw/alibi)"

# ---- seeds up to 2^53 - 1 in a sweep grid: exact in names, configs and reports ----
tiny_synthetic_cfg base2.json
cat > sws.json <<'JSON'
{"base": "base2.json", "set": {"train.steps": 1},
 "variants": [{"name": "a", "model.pos": "alibi"}],
 "grid": {"train.seed": [9007199254740991, 1000000000000001, 1000000000000002]},
 "eval": {"lengths": [16], "max_tokens": 200}, "out": "sws"}
JSON
expect_rc 0 "sweep of large seeds" "$BIN" sweep sws.json --quiet
for s in 9007199254740991 1000000000000001 1000000000000002; do
    d=sws/a__seed-$s
    [ -d "$d" ] && grep -q "\"seed\": $s" "$d/config.json" && grep -q "\"seed\":.$s" "$d/sweep_done.json" \
        && grep -q "\"seed\":.$s" "$d/eval_valid_nonoverlapping.json" && grep -q "\"seed\":.$s" sws/results.json \
        && grep -q "^a__seed-$s,done,alibi,$s," sws/results.csv && ok || bad "seed $s was not kept exactly: $(ls sws)"
done

# ---- result scripts: runs of different sweeps (other out dirs) or models are not averaged ----
for x in A B; do
    steps=1; [ $x = B ] && steps=3
    cat > sw$x.json <<JSON
{"base": "base2.json", "set": {"train.steps": $steps}, "variants": [{"name": "alibi", "model.pos": "alibi"}],
 "grid": {"train.seed": [1, 2]}, "eval": {"lengths": [16], "max_tokens": 200}, "out": "sweep$x"}
JSON
    expect_rc 0 "sweep $x" "$BIN" sweep sw$x.json --quiet
done
expect_rc 0 "results_tables of two sweeps" "$PY" "$SRC/scripts/results_tables.py" sweepA/results.json sweepB/results.json
grep -q '^| alibi \[out sweepA\] | 2 |' out.txt && grep -q '^| alibi \[out sweepB\] | 2 |' out.txt && ok \
    || bad "results_tables merged two sweeps' runs: $(cat out.txt)"
expect_rc 0 "results_tables of one sweep" "$PY" "$SRC/scripts/results_tables.py" sweepA/results.json sweepA/results.json
grep -q '^| alibi | 2 |' out.txt && ok || bad "one sweep read twice: $(cat out.txt)"
if "$PY" -c "import matplotlib" 2>/dev/null; then
    # the line names are listed by an --only that names none of them
    expect_rc 2 "plot of two sweeps" "$PY" "$SRC/scripts/plot.py" sweepA/results.json sweepB/results.json --only x -o p.png
    expect_err "have: alibi \[out sweepA\], alibi \[out sweepB\])"
    "$BIN" train base2.json --out r16 --quiet --set model.pos=alibi && "$BIN" eval r16 --lengths 16 --quiet \
        && "$BIN" train base2.json --out r8 --quiet --set model.pos=alibi --set train.seq_len=8 \
        && "$BIN" eval r8 --lengths 16 --quiet && ok || bad "two eval reports"
    expect_rc 2 "plot of two models' reports" "$PY" "$SRC/scripts/plot.py" r16/eval_valid_nonoverlapping.json \
        r8/eval_valid_nonoverlapping.json --only x -o p.png
    expect_err "have: alibi \[seq_len 16\], alibi \[seq_len 8\])"
else
    skip "plot.py (no matplotlib)"
fi

# ---- --quiet: no info lines from the data loader either ----
expect_rc 0 "train --quiet" "$BIN" train base2.json --out quiet --quiet
[ ! -s err.txt ] && ok || bad "train --quiet logged: $(cat err.txt)"
expect_rc 0 "eval --quiet" "$BIN" eval quiet --lengths 16 --quiet --json quiet.json
[ ! -s err.txt ] && ok || bad "eval --quiet logged: $(cat err.txt)"

# ---- training bookkeeping ----
# a train.steps 0 baseline that stays the best: best.ckpt holds its weights after a resume
# that never beats it (keep_last 1 drops step 0); the lr makes every later step worse
expect_rc 0 "steps 0 baseline" "$BIN" train base2.json --out b0 --quiet --set train.steps=0 --set train.keep_last=1 \
    --set train.optimizer.lr=5 --set train.schedule.warmup=0
[ -e b0/checkpoints/best.ckpt ] && ok || bad "a steps-0 baseline with a validation loss wrote no best.ckpt"
expect_rc 0 "resume that never beats it" "$BIN" train --resume b0 --quiet --set train.steps=6 \
    --set train.eval_every=2 --set train.checkpoint_every=2
grep -q '"step": 0, "val_loss"' b0/metrics.jsonl && [ ! -e b0/checkpoints/step_00000000.ckpt ] && ok \
    || bad "the setup of the check is off: $(ls b0/checkpoints)"
expect_rc 0 "eval best.ckpt" "$BIN" eval b0/checkpoints/best.ckpt --lengths 16 --quiet --json b0best.json
grep -q '"step":.0,' b0best.json && ok || bad "best.ckpt is not the step-0 baseline"
# init_from on a resume: refused (config.json would then name weights the run never used)
expect_rc 0 "a run to resume" "$BIN" train base2.json --out ir --quiet --set train.steps=4 --stop-after 2 \
    --set train.checkpoint_every=1
cp ir/config.json ir.before
expect_rc 2 "resume with another init_from" "$BIN" train --resume ir --set train.init_from=b0
expect_err "train.init_from applies to a fresh run only"
cmp -s ir.before ir/config.json && ok || bad "a refused resume rewrote config.json"
# init_from a safetensors export: init_from.json records it
expect_rc 0 "export" "$BIN" export b0 --out b0x
expect_rc 0 "init_from an export" "$BIN" train base2.json --out fx --quiet --set train.init_from=$T/b0x/model.safetensors
"$PY" -c "
import json, sys, zlib
o = json.load(open('fx/init_from.json'))
data = open('b0x/model.safetensors', 'rb').read()
sys.exit(0 if o['safetensors'].endswith('b0x/model.safetensors') and o['bytes'] == len(data)
         and o['crc32'] == '%08x' % zlib.crc32(data) else 1)
" && ok || bad "init_from.json of a safetensors start: $(cat fx/init_from.json 2>&1)"

# ---- a byte-level corpus that changed under a resume: warned (the tokenizer hash is the
# same for every byte-level text; the checkpoint now records the data's own hash) ----
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog $((i * 7))"; done > bytes.txt
cat > byte.json <<JSON
{"model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
 "data": {"source": "text", "path": "$T/bytes.txt", "tokenizer": "byte", "valid_frac": 0.1, "test_frac": 0.1,
          "cache_dir": "$T/cache"},
 "train": {"batch_size": 4, "seq_len": 16, "steps": 6, "eval_batches": 1, "checkpoint_every": 2, "threads": 1,
           "schedule": {"kind": "constant", "warmup": 0}}}
JSON
expect_rc 0 "byte run, stopped" "$BIN" train byte.json --out by --quiet --stop-after 2
expect_rc 0 "resume on the same data" "$BIN" train --resume by --quiet --stop-after 4
[ ! -s err.txt ] && ok || bad "a resume on unchanged data warned: $(cat err.txt)"
head -c 12000 bytes.txt > cut.txt && mv cut.txt bytes.txt
expect_rc 0 "resume on a changed corpus" "$BIN" train --resume by --quiet
expect_err "the training data changed since this checkpoint"

# ---- edges found by the config-combination probe ----
cat > tiny8.json <<'JSON'
{"model": {"n_layers": 1, "d_model": 8, "n_heads": 2}, "data": {"source": "synthetic"},
 "train": {"seq_len": 8, "batch_size": 1, "steps": 1, "threads": 1, "eval_batches": 1, "schedule": {"warmup": 0}}}
JSON
# extend of a run trained with a scaling from the start (train_len 0): N / its seq_len
expect_rc 0 "a run with a trained scaling" "$BIN" train tiny8.json --out sc --quiet --set model.pos=rope \
    --set model.scaling.transform=ntk
expect_rc 0 "extend it" "$BIN" extend sc --to 16 --steps 1 --transform pi --out scx --quiet
grep -q '"scale": 2,' scx/config.json && ok || bad "extend's default scale is not 16 / 8: $(grep scale scx/config.json)"
# extend --steps 0 of an inv_sqrt run: the default warmup is 1, not 0
expect_rc 0 "an inv_sqrt run" "$BIN" train tiny8.json --out is --quiet --set train.schedule.kind=inv_sqrt \
    --set train.schedule.warmup=1
expect_rc 0 "extend --steps 0 of it" "$BIN" extend is --to 16 --steps 0 --out isx --quiet
# a float key at its documented bound
expect_rc 0 "dropout 0.99" "$BIN" train tiny8.json --out d99 --quiet --set model.dropout_attn=0.99
# the passkey task over 2 symbols: the filler's branching names its key
expect_rc 2 "passkey over 2 symbols" "$BIN" train tiny8.json --out pk2 --quiet --set data.source=task \
    --set data.task.name=passkey --set data.task.symbols=2 --set data.task.min_size=7 --set data.task.max_size=8 \
    --set train.seq_len=16
expect_err "data.synthetic.branch: 4 exceeds data.task.symbols 2"
# eval.max_tokens 1: refused where it is set
expect_rc 2 "eval.max_tokens 1 in a config" "$BIN" train tiny8.json --out mt1 --quiet --set eval.max_tokens=1
expect_err "eval.max_tokens: 1 token has no target"
expect_rc 2 "eval --max-tokens 1" "$BIN" eval d99 --max-tokens 1 --lengths 8 --quiet --json mt1.json
# named by the flag, before anything is loaded (it began with the checkpoint's path)
expect_err "^stretch eval: error: --max-tokens '1': 1 token has no target to score"
[ ! -e mt1.json ] && ok || bad "eval --max-tokens 1 wrote a report"
# eval settings stored in the run: messages name them; a --transform brings its own scale
expect_rc 0 "a run with a sliding eval config" "$BIN" train tiny8.json --out sl --quiet --set eval.mode=sliding \
    --set eval.stride=8
expect_rc 2 "eval at a length below the stored stride" "$BIN" eval sl --lengths 4 --quiet --json sl4.json
expect_err "sliding stride 8 (--stride or eval.stride)"
expect_rc 0 "a rope run with an ntk eval config" "$BIN" train tiny8.json --out nt --quiet --set model.pos=rope \
    --set eval.transform=ntk --set eval.transform_scale=2
expect_rc 0 "eval --transform dynamic_ntk" "$BIN" eval nt --lengths 8 --transform dynamic_ntk --quiet --json nt.json

# ---- messages of float keys ----
expect_rc 2 "valid_frac out of range" "$BIN" data --source text --path corpus.txt --valid-frac 0.6
expect_err "data.valid_frac: must be in (0, 0.5], got 0.6$"
expect_rc 2 "valid_frac + test_frac" "$BIN" data --source text --path corpus.txt --valid-frac 0.5 --test-frac 0.0000001
expect_err "valid_frac + test_frac must be <= 0.5, got 0.5 + 1e-07"

finish cli_probe4
