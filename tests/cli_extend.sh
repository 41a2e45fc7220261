#!/usr/bin/env bash
# cli_extend.sh - context extension by fine-tuning end to end on tiny byte-level runs
# (docs/extension.md): `stretch extend` with zero steps equals the base run evaluated with
# the matching --transform; an extension trains, records its origin, resumes bit for bit,
# keeps model.scaling.* through export, is picked up by eval (an explicit --transform
# replaces it and says so) and generate; --budget sizes the run; bad input is exit 2
# naming the flag or key, with nothing written; a sweep point can extend a trained run.
. "$(dirname "$0")/lib_cli.sh" cli_extend

tiny_text_run rope
expect_rc 0 "train rope" "$BIN" train cfg.json --out rope --quiet
expect_rc 0 "train alibi" "$BIN" train cfg.json --out alibi --quiet --set model.pos=alibi

# zero fine-tuning steps: the base weights under model.scaling == the base + --transform
for x in pi ntk yarn; do
    expect_rc 0 "extend $x, 0 steps" "$BIN" extend rope --to 64 --transform "$x" --steps 0 --out "z_$x" --quiet
    expect_rc 0 "eval z_$x" "$BIN" eval "z_$x" --lengths 32,64,128 --json "z_$x.json" --quiet
    expect_rc 0 "eval rope + $x" "$BIN" eval rope --lengths 32,64,128 --transform "$x" --scale 2 --json "t_$x.json" --quiet
    "$PY" - "z_$x.json" "t_$x.json" <<'EOF2' && ok || bad "$x: 0-step extension vs base + transform"
import json, sys
a, b = (json.load(open(p))["results"] for p in sys.argv[1:3])
for x, y in zip(a, b):
    assert abs(x["loss"] - y["loss"]) <= 1e-6 * max(1, abs(y["loss"])), (x["loss"], y["loss"])
EOF2
done
expect_rc 0 "alibi_interp, 0 steps" "$BIN" extend alibi --to 128 --transform alibi_interp --steps 0 --out z_ai --quiet
expect_rc 0 "eval z_ai" "$BIN" eval z_ai --lengths 128 --json z_ai.json --quiet
expect_rc 0 "eval alibi + interp" "$BIN" eval alibi --lengths 128 --transform alibi_interp --scale 4 --json t_ai.json --quiet
"$PY" -c "
import json
a, b = json.load(open('z_ai.json'))['results'][0]['loss'], json.load(open('t_ai.json'))['results'][0]['loss']
assert abs(a - b) <= 1e-6 * abs(b), (a, b)" && ok || bad "alibi_interp: 0-step extension vs base + transform"

# a real extension: yarn at 2x, its origin, the keys in config.json and in the export
expect_rc 0 "extend yarn" "$BIN" extend rope --to 64 --transform yarn --steps 6 --lr 5e-4 --out ext --quiet \
    --set train.log_every=1
"$PY" - <<'EOF2' && ok || bad "extension config and origin"
import json
c = json.load(open("ext/config.json"))
sc = c["model"]["scaling"]
assert sc == {"transform": "yarn", "scale": 2, "train_len": 32, "yarn_alpha": 1, "yarn_beta": 32}, sc
t = c["train"]
assert t["seq_len"] == 64 and t["steps"] == 6 and t["optimizer"]["lr"] == 5e-4 and t["batch_size"] == 2, t
assert t["schedule"]["warmup"] == 0 and t["init_from"].endswith("rope"), t
o = json.load(open("ext/init_from.json"))
assert o["step"] == 20 and o["train_seq_len"] == 32 and o["pos"] == "rope", o
assert o["checkpoint"].endswith("rope/checkpoints/step_00000020.ckpt"), o
EOF2
expect_rc 0 "export ext" "$BIN" export ext --out exp
"$PY" -c "
import json
assert json.load(open('exp/config.json'))['model']['scaling']['transform'] == 'yarn'" && ok || bad "export keeps model.scaling"

# resume across the extension is bit-exact
expect_rc 0 "extend, stopped" "$BIN" extend rope --to 64 --transform yarn --steps 6 --lr 5e-4 --out ext2 --stop-after 3 \
    --quiet --set train.log_every=1
expect_rc 0 "resume" "$BIN" train --resume ext2 --quiet
"$PY" - <<'EOF2' && ok || bad "resumed extension differs from the uninterrupted one"
import json
def losses(p):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r and "step" in r]
a, b = losses("ext/metrics.jsonl"), losses("ext2/metrics.jsonl")
assert a == b and len(a) == 6, (a, b)
EOF2
expect_rc 0 "export ext2" "$BIN" export ext2 --out exp2
cmp -s exp/model.safetensors exp2/model.safetensors && ok || bad "final weights differ after the resume"

# eval and generate use the scaling; an explicit transform replaces it and says so
expect_rc 0 "eval ext" "$BIN" eval ext --lengths 64 --quiet
expect_rc 0 "eval ext --transform pi" "$BIN" eval ext --lengths 64 --transform pi --quiet
expect_err "replaces the model's trained scaling yarn s=2"
# --transform none is no inference-time transform: the scaling stays, and the log says how
# to evaluate without it (the same kind at scale 1, which is the identity)
expect_rc 0 "eval ext, default" "$BIN" eval ext --lengths 64 --json def.json
expect_rc 0 "eval ext --transform none" "$BIN" eval ext --lengths 64 --transform none --json none.json
expect_err "keeps the model's trained scaling yarn s=2 (model.scaling.\*); an identity transform replaces it (--transform yarn --scale 1)"
expect_rc 0 "eval ext --transform yarn --scale 1" "$BIN" eval ext --lengths 64 --transform yarn --scale 1 --json id.json
"$PY" - <<'EOF2' && ok || bad "--transform none must equal the default (scaled); yarn s=1 must differ"
import json
loss = lambda p: json.load(open(p))["results"][0]["loss"]
assert loss("def.json") == loss("none.json"), (loss("def.json"), loss("none.json"))
assert loss("id.json") != loss("def.json"), loss("id.json")
EOF2
same_text "generate ext" ext --prompt "the quick" --tokens 40 --context 64 --seed 2

# --budget: 10% of 20 x 4 x 32 tokens at 2 x 64 per step = 2 steps
expect_rc 0 "extend --budget" "$BIN" extend rope --to 64 --budget 0.1 --out bud --quiet
"$PY" -c "
import json
c = json.load(open('bud/config.json'))
assert c['train']['steps'] == 2 and c['model']['scaling']['transform'] == 'none', c['train']" && ok || bad "--budget steps"

# --budget counts the steps a base run stopped short of its train.steps did train (probe
# 44: the planned 20 steps were counted): 10% of 10 x 4 x 32 tokens at 2 x 64 = 1 step
expect_rc 0 "a base run stopped at step 10 of 20" "$BIN" train cfg.json --out half --quiet --stop-after 10
expect_rc 0 "extend --budget of a stopped run" "$BIN" extend half --to 64 --budget 0.1 --out bud_half --quiet
expect_err "half stopped at step 10 of its train.steps 20: --budget 0.1 counts the tokens of the steps it trained"
"$PY" -c "
import json
assert json.load(open('bud_half/config.json'))['train']['steps'] == 1" && ok || bad "--budget of a stopped run: steps"
expect_rc 2 "--budget above its range" "$BIN" extend rope --to 64 --budget 1e7 --out b13
expect_err "--budget '1e7': a fraction in (0, 1e6]"
# the default warmup follows a --set of the schedule's kind (inv_sqrt: at least 1)
expect_rc 0 "extend --set inv_sqrt" "$BIN" extend rope --to 64 --steps 5 --out inv --quiet \
    --set train.schedule.kind=inv_sqrt
"$PY" -c "
import json
assert json.load(open('inv/config.json'))['train']['schedule']['warmup'] == 1" && ok || bad "inv_sqrt default warmup"
# read as the load reads it: the last --set of the key wins, a JSON string is the same value
expect_rc 0 "extend --set cosine, then inv_sqrt" "$BIN" extend rope --to 64 --steps 5 --out inv2 --quiet \
    --set train.schedule.kind=cosine --set 'train.schedule.kind="inv_sqrt"'
"$PY" -c "
import json
s = json.load(open('inv2/config.json'))['train']['schedule']
assert s['kind'] == 'inv_sqrt' and s['warmup'] == 1, s" && ok || bad "the last --set of the kind decides the warmup"
expect_rc 0 "extend --set inv_sqrt, then cosine" "$BIN" extend rope --to 64 --steps 5 --out inv3 --quiet \
    --set train.schedule.kind=inv_sqrt --set train.schedule.kind=cosine
"$PY" -c "
import json
s = json.load(open('inv3/config.json'))['train']['schedule']
assert s['kind'] == 'cosine' and s['warmup'] == 0, s" && ok || bad "cosine after inv_sqrt keeps the warmup of 0"
# the scaling's keys are --transform/--scale's (a --set of one left pi at scale 1)
expect_rc 2 "--set model.scaling.transform" "$BIN" extend rope --to 64 --steps 1 --out b14 \
    --set model.scaling.transform=pi
expect_err "--set model.scaling.transform=pi: the extended run's scaling is --transform NAME \[--scale S\]"
[ ! -e b13 ] && [ ! -e b14 ] && ok || bad "a refused extension wrote its directory"

# a base whose latest checkpoint is another run's (here the yarn extension's): its model
# keys differ from config.json's, so the plan would be wrong; refused as --resume refuses
# it (probe 44: extended as "L = 32" with the scaling silently dropped)
cp -r rope foreign && cp "ext/checkpoints/$(cat ext/checkpoints/latest)" "foreign/checkpoints/$(cat foreign/checkpoints/latest)"
expect_rc 5 "extend a base holding another run's checkpoint" "$BIN" extend foreign --to 128 --steps 1 --out b15
expect_err "checkpoint does not match the run config (foreign/config.json): model.scaling"
[ ! -e b15 ] && ok || bad "a refused extension wrote its directory"

# log-n scaling keeps the base run's length: queries sharpen past L as in the base model
expect_rc 0 "train logn" "$BIN" train cfg.json --out logn --quiet --set model.attn_scale=logn
expect_rc 0 "extend logn" "$BIN" extend logn --to 64 --steps 1 --out logn_ext --quiet
"$PY" -c "
import json
m = json.load(open('logn_ext/config.json'))['model']
assert m['attn_scale'] == 'logn' and m['attn_scale_len'] == 32, m" && ok || bad "extension changed attn_scale_len"

# bad input: exit 2 naming the flag or key, nothing written
expect_rc 2 "--to below" "$BIN" extend rope --to 16 --steps 1 --out b1
expect_err "--to 16: must be longer than the base run's train.seq_len 32"
expect_rc 2 "pi on alibi" "$BIN" extend alibi --to 64 --transform pi --steps 1 --out b2
expect_err "model.scaling.transform: pi applies to model.pos \"rope\" only"
expect_rc 2 "scale below 1" "$BIN" extend rope --to 64 --transform pi --scale 0.5 --steps 1 --out b3
expect_err "--scale"
expect_rc 2 "inference-only" "$BIN" extend rope --to 64 --transform dynamic_ntk --steps 1 --out b4
expect_err "inference-only"
expect_rc 2 "yarn ramp" "$BIN" extend rope --to 64 --transform yarn --steps 1 --out b5 --set model.scaling.yarn_beta=0.5
expect_err "model.scaling.yarn_beta"
expect_rc 2 "yarn key on pi" "$BIN" extend rope --to 64 --transform pi --steps 1 --out b6 --set model.scaling.yarn_alpha=2
expect_err "model.scaling.yarn_alpha: applies to model.scaling.transform yarn only"
expect_rc 2 "scale without transform" "$BIN" extend rope --to 64 --scale 2 --steps 1 --out b7
expect_err "--scale needs --transform"
expect_rc 2 "neither steps nor budget" "$BIN" extend rope --to 64 --out b8
expect_rc 2 "--set train.seq_len against --to" "$BIN" extend rope --to 64 --steps 1 --out b8 --set train.seq_len=256
expect_err "--set train.seq_len=256: the extended run's train.seq_len is --to N"
cp -r rope rcor && ck=rcor/checkpoints/$(cat rcor/checkpoints/latest) && printf 'XXXX' | dd of="$ck" bs=1 seek=200 conv=notrunc 2>/dev/null
expect_rc 5 "a corrupt base checkpoint" "$BIN" extend rcor --to 64 --steps 1 --out b9
expect_err "^stretch extend: error: rcor: the base run's checkpoint: .*corrupt checkpoint"   # not RUN/config.json's init_from
expect_rc 3 "no base run" "$BIN" extend nope --to 64 --steps 1 --out b9
expect_err "nope: not a run directory"
expect_rc 2 "scaling key in a config" "$BIN" train cfg.json --out b10 --set model.scaling.scale=0
expect_err "model.scaling.scale"
expect_rc 2 "shorter than the base, by config" "$BIN" train cfg.json --out b11 --set train.init_from=rope \
    --set model.scaling.transform=pi --set model.scaling.scale=2 --set train.seq_len=16
expect_err "train.seq_len: 16 is shorter than the base run's 32"
expect_rc 5 "init_from a run of another shape" "$BIN" train cfg.json --out b12 --set train.init_from=rope \
    --set model.d_model=64
expect_err "train.init_from: .*rope/checkpoints/step_00000020.ckpt: checkpoint has 27 parameters"
for d in b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12; do [ -e "$d" ] && bad "$d was written"; done; ok

# a sweep point extends a trained run through train.init_from + model.scaling.*
cat > sw.json <<'EOF2'
{"base": "cfg.json", "variants": [
   {"name": "ext-pi", "train.init_from": "rope", "train.seq_len": 64, "train.batch_size": 2, "train.steps": 4,
    "model.scaling.transform": "pi", "model.scaling.scale": 2, "model.scaling.train_len": 32}],
 "eval": {"lengths": [32, 64]}, "out": "sw"}
EOF2
expect_rc 0 "extension sweep" "$BIN" sweep sw.json --quiet
grep -q "rope+pi2" sw/results.md && ok || { bad "sweep row label lacks the scaling"; cat sw/results.md; }
[ -f sw/ext-pi/init_from.json ] && ok || bad "sweep point lacks init_from.json"
expect_rc 0 "sweep again: nothing to do" "$BIN" sweep sw.json --quiet

finish cli_extend
