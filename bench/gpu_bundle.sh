#!/bin/bash
# Builds what bench/gpu_train_step.py needs on a GPU machine that has no
# LLVM, gloo or OpenBLAS and cannot receive the 548 MB weights file:
#
#   bench/gpu_bundle.sh OUTDIR [ONNX_DIR]
#
# OUTDIR/bundle.tar.xz       the --target cuda executable `train` and the
#                            shared libraries it links beyond the C/C++
#                            runtime (lib/), ~7 MB compressed
# OUTDIR/train.weights.pack  its weights file as header + formula
#                            (bench/gpu_weights.py), ~130 KB
# OUTDIR/provenance.txt      the weftc, commit and uncommitted compiler
#                            sources it was built from
#
# ONNX_DIR (default /tmp/weft-gpt2-124m) holds gpt.onnx, exported with
# formula weights if missing (GPT-2 124M, batch 8, T 1024; ~90 s).
# WEFTC (default build/bin/weftc, from the repository root) picks the
# compiler; its runtime libraries are taken from beside it, as weftc does.
# Then, on the GPU machine: BENCH_DIR=OUTDIR bash bench/gpu_bench.sh
# (bench/gpu_prepare.sh and gpu_device_check.sh do both, with more checks)
set -euo pipefail
out=${1:?usage: bench/gpu_bundle.sh OUTDIR [ONNX_DIR]}
onnx=${2:-/tmp/weft-gpt2-124m}
weftc=${WEFTC:-build/bin/weftc}
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)

if [ ! -f "$onnx/gpt.onnx" ]; then
  $py "$here/gpu_weights.py" export --out "$onnx" --batch 8 --block 1024
fi
mkdir -p "$out"
stage=$(mktemp -d /tmp/weft-gpu-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
{
  echo "built $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
  echo "weftc: $weftc ($(stat -c '%y' "$weftc"))"
  echo "commit: $(git -C "$here/.." rev-parse HEAD)"
  echo "uncommitted compiler sources at build time:"
  git -C "$here/.." status --short -- lib include tools | sed 's/^/  /'
} > "$out/provenance.txt"
"$weftc" "$onnx/gpt.onnx" --target cuda --precision bf16 --optimizer adamw \
  --embed-weights-limit 0 --summary -o "$stage/train" 2>&1 |
  grep -v "float initializer\|merged equal values\|gets no gradient\|: tensors$" |
  tee -a "$out/provenance.txt"
# WEFT_BUNDLE_ALSO="FLAGS:LABEL" adds a second build of the model,
# train_LABEL, with FLAGS added (gpu_train_step.py --also-exe times it).
also=${WEFT_BUNDLE_ALSO:-}
if [ -n "$also" ]; then
  "$weftc" "$onnx/gpt.onnx" --target cuda --precision bf16 --optimizer adamw \
    --embed-weights-limit 0 ${also%%:*} -o "$stage/train_${also##*:}" 2>&1 |
    grep -v "float initializer\|merged equal values\|gets no gradient\|: tensors$"
  cmp "$stage/train_${also##*:}.weights.safetensors" "$stage/train.weights.safetensors"
  rm -f "$stage/train_${also##*:}.weights.safetensors"
  echo "also: train_${also##*:} (${also%%:*})" >> "$out/provenance.txt"
fi
$py "$here/gpu_weights.py" pack "$stage/train.weights.safetensors" \
  "$out/train.weights.pack"
# The rebuilt file must be the one weftc wrote, byte for byte.
$py "$here/gpu_weights.py" unpack "$out/train.weights.pack" "$stage/check"
cmp "$stage/check" "$stage/train.weights.safetensors"
rm -f "$stage/check" "$stage/train.weights.safetensors"
# Everything ldd resolves except the C and C++ runtimes, which the GPU
# machine has.
ldd "$stage/train" | awk '$3 ~ /^\// {print $3}' |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -C "$stage" -cJf "$out/bundle.tar.xz" $(cd "$stage" && ls -d train train_* 2>/dev/null) lib
ls -l "$out"
