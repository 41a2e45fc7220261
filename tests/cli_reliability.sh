#!/usr/bin/env bash
# cli_reliability.sh - regressions of issue 14 (reliability and hygiene), end to end:
#   outputs  an empty or too-long path (--out "", a 4000-byte --out, ...) is exit 2 in
#            every subcommand and creates nothing; a run under a ~1000-byte path trains,
#            evaluates and exports (item 1, 6)
#   flags    --lengths with empty items, --seed -1, --temperature inf / nan: exit 2
#            naming the flag (item 9)
. "$(dirname "$0")/lib_cli.sh" reliability

# expect CODE WHAT 'SUBSTRING' -- CMD...
expect() {
    local code=$1 what=$2 want=$3; shift 4
    expect_rc "$code" "$what" "$@"
    [ -z "$want" ] || expect_err "$want"
}
cat >tiny.json <<EOF2
{
  "model": {"n_layers": 1, "d_model": 16, "n_heads": 2, "pos": "alibi"},
  "data": {"source": "synthetic", "cache_dir": "$T/cache", "synthetic": {"vocab": 16, "tokens": [4000, 1000, 1000]}},
  "train": {"batch_size": 4, "seq_len": 16, "steps": 2, "eval_every": 2, "eval_batches": 1, "log_every": 1,
            "checkpoint_every": 2, "threads": 1, "schedule": {"kind": "constant", "warmup": 0}}
}
EOF2
expect 0 "tiny run" "" -- "$BIN" train tiny.json --out run --quiet

# ---- item 1: an empty path is never the filesystem root ----
# A binary with the bug writes /config.json, /checkpoints/...: as root the cases run as
# nobody (setpriv), so a regression fails the test without touching the real root.
ls -A / >root_before.txt
as_nobody=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    chmod 755 "$T" && chmod 644 tiny.json
fi
expect 2 "train --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" train tiny.json --out "" --quiet
expect 2 "train --resume ''" "--resume: empty path" -- "${as_nobody[@]}" "$BIN" train --resume "" --quiet
expect 2 "train ''" "CONFIG: empty path" -- "${as_nobody[@]}" "$BIN" train "" --quiet
expect 2 "eval ''" "empty path" -- "${as_nobody[@]}" "$BIN" eval "" --lengths 16 --quiet
expect 2 "eval --json ''" "--json: empty path" -- "${as_nobody[@]}" "$BIN" eval run --lengths 16 --json "" --quiet
expect 2 "export --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" export run --out ""
expect 2 "export ''" "empty path" -- "${as_nobody[@]}" "$BIN" export "" --out exp
expect 2 "generate ''" "empty path" -- "${as_nobody[@]}" "$BIN" generate "" --tokens 2
expect 2 "sweep --out ''" "--out: empty path" -- "${as_nobody[@]}" "$BIN" sweep tiny.json --out ""
expect 2 "bench --json ''" "--json: empty path" -- "${as_nobody[@]}" "$BIN" bench --preset tiny --json ""
expect 2 "data --path ''" "--path: empty path" -- "${as_nobody[@]}" "$BIN" data --source text --path ""
ls -A / >root_after.txt
cmp -s root_before.txt root_after.txt && ok || bad "the filesystem root changed: $(diff root_before.txt root_after.txt)"
[ ! -e exp ] && ok || bad "export '' created exp"

# ---- item 6: long paths are used whole, or refused by name ----
long="$T/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))/$(printf 'f%.0s' $(seq 200))/$(printf 'g%.0s' $(seq 200))/$(printf 'h%.0s' $(seq 200))"
expect 0 "train under a ${#long}-byte path" "" -- "$BIN" train tiny.json --out "$long/run" --quiet
expect 0 "eval under a long path" "" -- "$BIN" eval "$long/run" --lengths 16,32 --quiet
[ -s "$long/run/eval_valid_nonoverlapping.json" ] && ok || bad "eval report missing under the long path"
expect 0 "eval of a checkpoint under a long path" "" -- "$BIN" eval "$long/run/checkpoints/step_00000002.ckpt" --lengths 16 --quiet
expect 0 "export under a long path" "" -- "$BIN" export "$long/run" --out "$long/exp"
[ -s "$long/exp/model.safetensors" ] && ok || bad "export missing under the long path"
huge="$T/$(printf 'x%.0s' $(seq 4000))"
expect 2 "train --out 4000 bytes" "--out: path is" -- "$BIN" train tiny.json --out "$huge" --quiet
expect 2 "data.path 4000 bytes" "data.path" -- "$BIN" train tiny.json --out r2 --quiet --set "data.source=text" --set "data.path=$huge"

# ---- item 9: flag values that used to be read loosely ----
expect 2 "--lengths 16,,32" "--lengths '16,,32'" -- "$BIN" eval run --lengths 16,,32 --quiet
expect 2 "--lengths 16," "--lengths" -- "$BIN" eval run --lengths 16, --quiet
expect 2 "--lengths ,16" "--lengths" -- "$BIN" eval run --lengths ,16 --quiet
expect 2 "generate --seed -1" "--seed '-1'" -- "$BIN" generate run --seed -1 --tokens 2
expect 2 "generate --temperature inf" "--temperature 'inf'" -- "$BIN" generate run --temperature inf --tokens 2
expect 2 "generate --temperature nan" "--temperature 'nan'" -- "$BIN" generate run --temperature nan --tokens 2
expect 2 "bench --eval 64,,128" "--eval" -- "$BIN" bench --preset tiny --eval 64,,128
expect 2 "data --seed -1" "--seed" -- "$BIN" data --source synthetic --seed -1
expect 0 "generate --seed 0 --temperature 0" "" -- "$BIN" generate run --seed 0 --temperature 0 --tokens 2

echo "cli_reliability: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
