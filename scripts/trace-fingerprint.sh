#!/usr/bin/env bash
# scripts/trace-fingerprint.sh: behaviour fingerprints of a build, for showing that a change
# to the code leaves training untouched. Runs the quick start and the fixed-format, MuPPET and
# AMP Fashion-MNIST configurations for a few epochs with the given adapt-train, then writes per
# run the trace without the fields that differ between runs and builds of the same training
# (header "created", "version" and "build"; "wall_s", "images_per_s"; the folders of the config
# file and of the model description) and the SHA-256 of the final weights.
#
#   scripts/trace-fingerprint.sh OUTDIR [ADAPT_TRAIN] [EPOCHS]
#   diff -r before/ after/          # no output: same traces, same weights
#
# ADAPT_TRAIN defaults to ./adapt-train, EPOCHS to 2. Needs python3 (json) and the
# Fashion-MNIST data the configurations name.
set -euo pipefail
out=${1:?usage: trace-fingerprint.sh OUTDIR [ADAPT_TRAIN] [EPOCHS]}
bin=${2:-./adapt-train}
epochs=${3:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for cfg in quickstart fmnist_lenet5_fixed fmnist_lenet5_muppet fmnist_lenet5_amp; do
    "$bin" --config "$here/experiments/configs/$cfg.ini" --set train.epochs="$epochs" \
        --out "$work/$cfg" --force >"$work/$cfg.log" 2>&1 ||
        { echo "trace-fingerprint.sh: $cfg failed:" >&2; cat "$work/$cfg.log" >&2; exit 1; }
    python3 - "$work/$cfg/trace.jsonl" >"$out/$cfg.trace" <<'PY'
import json, sys
DROP = {"created", "version", "build", "wall_s", "images_per_s"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
with open(sys.argv[1]) as f:
    for line in f:
        rec = json.loads(line)
        if isinstance(rec.get("config_file"), str):
            rec["config_file"] = rec["config_file"].rsplit("/", 1)[-1]
        cfg = rec.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("run"), dict):
            cfg["run"].pop("out", None)
        desc = rec.get("model", {}).get("description") if isinstance(rec.get("model"), dict) \
            else None
        if isinstance(desc, dict) and isinstance(desc.get("file"), str):
            desc["file"] = desc["file"].rsplit("/", 1)[-1]  # the checkout's folder differs
        print(json.dumps(strip(rec), sort_keys=True))
PY
    (cd "$work/$cfg" && sha256sum model.safetensors) >"$out/$cfg.weights.sha256"
    echo "$cfg: $(wc -l <"$out/$cfg.trace") records"
done
