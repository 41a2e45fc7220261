#!/usr/bin/env bash
# cli_probe8.sh - the findings of the eighth round of black-box probes (the newest features
# in combination with the older ones, and the docs' example commands) that are not checked
# beside their feature's own tests:
#   - eval reports' "model" object named pos, sizes and parameters but not the block: the
#     eval reports of a swiglu and a geglu run (same parameter count) had equal model
#     objects, so scripts/plot.py averaged the two models into one line as if they were
#     seeds of one experiment (and so would any two runs that differ in model.norm, bias,
#     qk_norm, n_kv_heads or out_gate but happen to match in parameters). The object now
#     carries the block keys that differ from the GPT-2 block (as attn_scale when not
#     none), in eval, eval --task and passkey reports alike.
#   - extend into a directory holding a run said "continue it with --resume DIR", a flag
#     extend does not have (exit 2, unknown option): it names `stretch train --resume`.
#   - an export directory (model.safetensors, config.json, tokenizer.json) passed for a run:
#     `train --resume EXPORT` took its config.json for a run stopped before its first
#     checkpoint and trained a new run into the export (exit 0), and `train --out EXPORT`
#     (the refusal's advice was that --resume) or `extend --out EXPORT` with --force
#     replaced the export's config.json and tokenizer.json beside the model.safetensors
#     they described. Refused now (exit 3, the files untouched), as export refuses a run
#     directory even with --force. `extend EXPORT` (exit 3) advised "name its weights",
#     which extend cannot take: it says what extend fine-tunes and how to start a run from
#     an export's weights.
#   - train.init_from a `stretch export`'s model.safetensors with a model key that has no
#     tensor set otherwise (the swiglu export loaded as geglu: same tensors) trained another
#     function without a word, where a checkpoint or run directory warns naming the key
#     (configs/README.md, train.init_from): the export's config.json beside the file is
#     compared now (d_ff and n_kv_heads resolved on both sides, so no false alarm).
#   - a sweep variant named "." or ".." (no grid after it) named the point's run directory
#     OUT/. (OUT itself: "in use by another stretch process", exit 3, after the points
#     before it had trained) or OUT/.. (OUT's parent, never empty: exit 3); such a name
#     becomes "_" / "__", as a "/" in a name becomes "_".
#   - data.task.doc_mask was refused for fox ("not available ... in training: its gates
#     decay a key by every token after it; sinks would need the gates ..."): the check
#     asked whether the method takes attention sinks, and fox does not, though the mask
#     keeps one span of keys, as a window (which fox takes) does, and fox's kernels take
#     the mask (test_attention_gate, test_pytorch_ref; docs/tasks.md names CoPE alone).
#     A method's own no_doc_mask reason decides now: fox trains with the mask (the probe's
#     float64 transcription gave its first loss, each instance alone, to 3e-8), CoPE is
#     still refused, with its own reason instead of the sinks one.
#   - scripts/extend_passkey.sh (docs/results-extension.md) took --help for its BASE_DIR:
#     it created runs/extend_passkey, then failed in stretch eval on a run "--help/rope";
#     it prints its header now, and a BASE_DIR without the rope and alibi runs is an error
#     (exit 3) before OUT_DIR is made.
. "$(dirname "$0")/lib_cli.sh" cli_probe8

# ---- the block in eval reports' model object ----
tiny_text_run alibi
for f in swiglu geglu; do
    expect_rc 0 "train $f" "$BIN" train cfg.json --out "r_$f" --quiet --set model.ffn=$f
    expect_rc 0 "eval $f" "$BIN" eval "r_$f" --lengths 32,64 --quiet
done
expect_rc 0 "train llama-style block" "$BIN" train cfg.json --out r_ll --quiet --set model.norm=rmsnorm \
    --set model.ffn=swiglu --set model.bias=false --set model.qk_norm=rmsnorm --set model.n_kv_heads=2 \
    --set model.out_gate=headwise --set model.out_norm=rmsnorm --set model.kv_shift=key
expect_rc 0 "eval llama-style block" "$BIN" eval r_ll --lengths 32 --quiet
"$PY" - "$SRC/scripts" <<'EOF' && ok || bad "eval reports of other blocks have other model objects"
import json, sys
sys.path.insert(0, sys.argv[1])
from sweep_json import report_key
a = json.load(open("r_swiglu/eval_valid_nonoverlapping.json"))
b = json.load(open("r_geglu/eval_valid_nonoverlapping.json"))
assert a["model"]["params"] == b["model"]["params"], (a["model"], b["model"])   # the premise
assert a["model"]["ffn"] == "swiglu" and b["model"]["ffn"] == "geglu", (a["model"], b["model"])
assert report_key(a) != report_key(b)   # plot.py: two experiments, not two seeds of one
m = json.load(open("r_ll/eval_valid_nonoverlapping.json"))["model"]
want = {"norm": "rmsnorm", "ffn": "swiglu", "bias": False, "qk_norm": "rmsnorm", "n_kv_heads": 2,
        "out_gate": "headwise", "out_norm": "rmsnorm", "kv_shift": "key"}
assert all(m.get(k) == v for k, v in want.items()), m
assert not any(k in a["model"] for k in ("norm", "bias", "qk_norm", "n_kv_heads", "out_gate", "out_norm", "kv_shift")), \
    a["model"]
EOF

# ---- extend into an existing run: the command that continues it ----
expect_rc 0 "extend" "$BIN" extend r_swiglu --to 64 --steps 1 --out ext --quiet
expect_rc 3 "extend again" "$BIN" extend r_swiglu --to 64 --steps 1 --out ext --quiet
expect_err "continue it with stretch train --resume ext"
expect_rc 0 "the advice works" "$BIN" train --resume ext --quiet

# ---- an export directory is never a run's ----
expect_rc 0 "export" "$BIN" export r_swiglu --out exp
cp exp/config.json exp_config.json
expect_rc 3 "train --resume EXPORT" "$BIN" train --resume exp --quiet
expect_err "an export"
expect_rc 3 "train --out EXPORT" "$BIN" train cfg.json --out exp --quiet
expect_err "holds an export"
expect_rc 3 "train --out EXPORT --force" "$BIN" train cfg.json --out exp --force --quiet
expect_rc 3 "extend --out EXPORT --force" "$BIN" extend r_swiglu --to 64 --steps 1 --out exp --force --quiet
[ ! -e exp/checkpoints ] && [ ! -e exp/metrics.jsonl ] && cmp -s exp/config.json exp_config.json && ok \
    || bad "the export was trained into or its config.json replaced"
expect_rc 3 "extend EXPORT" "$BIN" extend exp --to 64 --steps 1 --quiet
expect_err "extend fine-tunes a run directory"
[ ! -e exp-to64 ] && ok || bad "extend EXPORT made exp-to64"
expect_rc 0 "the export still loads" "$BIN" train cfg.json --out from_exp --quiet --set train.steps=0 \
    --set model.ffn=swiglu --set train.init_from=exp/model.safetensors

# ---- init_from an export: model keys without tensors compared with the export's config ----
expect_rc 0 "init_from the swiglu export as geglu" "$BIN" train cfg.json --out from_exp_geglu --set train.steps=0 \
    --set model.ffn=geglu --set train.init_from=exp/model.safetensors
expect_err 'model.ffn: "swiglu" vs "geglu"'
expect_rc 0 "init_from the export as it was trained" "$BIN" train cfg.json --out from_exp_same --set train.steps=0 \
    --set model.ffn=swiglu --set train.init_from=exp/model.safetensors
grep -q 'differ.* from the run that trained' err.txt && bad "a warning for the export's own keys: $(grep differ err.txt)" || ok

# ---- sweep variants named . and .. ----
cat > swdot.json <<'EOF2'
{"base": "cfg.json", "set": {"train.steps": 2, "train.eval_every": 2, "train.schedule.warmup": 0},
 "variants": [{"name": ".", "model.pos": "alibi"}, {"name": "..", "model.pos": "none"}],
 "eval": {"lengths": [32]}, "out": "swdot/out"}
EOF2
expect_rc 0 "sweep with variants . and .." "$BIN" sweep swdot.json --quiet
[ -f swdot/out/_/config.json ] && [ -f swdot/out/__/config.json ] && [ ! -e swdot/out/config.json ] \
    && [ ! -e swdot/config.json ] && ok || bad "the points . and .. did not get directories of their own"

# ---- data.task.doc_mask with fox ----
cat > dm.json <<'EOF2'
{"model": {"n_layers": 2, "d_model": 32, "n_heads": 4, "pos": "fox", "init_std": 0.3},
 "data": {"source": "task", "task": {"name": "mqar", "min_size": 1, "max_size": 4, "symbols": 32, "pack": true,
          "doc_mask": true}},
 "train": {"seed": 3, "batch_size": 1, "seq_len": 64, "steps": 1, "threads": 1, "log_every": 1,
           "schedule": {"kind": "constant", "warmup": 0}, "eval_every": 0, "eval_batches": 0}}
EOF2
expect_rc 0 "fox with data.task.doc_mask" "$BIN" train dm.json --out dm_fox --quiet
expect_rc 0 "fox without the mask" "$BIN" train dm.json --out dm_fox_open --quiet --set data.task.doc_mask=false
a=$(grep -o '"loss": [^,]*' dm_fox/metrics.jsonl); b=$(grep -o '"loss": [^,]*' dm_fox_open/metrics.jsonl)
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && ok || bad "the mask changes nothing ($a, $b)"
expect_rc 2 "cope with data.task.doc_mask" "$BIN" train dm.json --out dm_cope --quiet --set model.pos=cope
expect_err 'data.task.doc_mask: not available with model.pos "cope"'
grep -q sinks err.txt && bad "cope's doc_mask refusal speaks of sinks: $(cat err.txt)" || ok

# ---- scripts/extend_passkey.sh: --help, and a missing base before anything is made ----
(cd "$T" && STRETCH_BIN="$BIN" bash "$SRC/scripts/extend_passkey.sh" --help >out.txt 2>err.txt)
[ $? = 0 ] && ok || bad "extend_passkey.sh --help: not exit 0"
expect_out "BASE_DIR"
[ ! -e runs ] && ok || bad "extend_passkey.sh --help made runs/"
(cd "$T" && STRETCH_BIN="$BIN" bash "$SRC/scripts/extend_passkey.sh" nobase epout >out.txt 2>err.txt)
[ $? = 3 ] && ok || bad "extend_passkey.sh with a missing BASE_DIR: not exit 3"
expect_err "nobase/rope: no such run"
[ ! -e epout ] && ok || bad "extend_passkey.sh made OUT_DIR for a missing BASE_DIR"

finish cli_probe8
