#!/bin/bash
# GPT-2 124M bf16 training steps on the GPU: Weft (--target cuda) against
# PyTorch eager and torch.compile (bench/gpu_train_step.py; issue 15).
# From the repository root: bash bench/gpu_bench.sh   (about 30 s with eager
# PyTorch only; bench/gpu_device_check.sh runs it)
# .devrun/gpt2/ is made by bench/gpu_bundle.sh .devrun/gpt2 (on the build
# machine): bundle.tar.xz holds the executable and the shared libraries it
# needs (gloo, openblas, omp and theirs), train.weights.pack its 548 MB
# weights file as header + formula (bench/gpu_weights.py).
# Extra arguments go to gpu_train_step.py; BENCH_DIR and PYTHON override.
set -u
root=$(pwd)
dir=${BENCH_DIR:-$root/.devrun/gpt2}
py=${PYTHON:-python3}
out=${OUT:-/tmp/weft-bench-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/weft-bench.XXXXXX)
$py -c "import tarfile, sys; kw = {'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}; tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)" \
  "$dir/bundle.tar.xz" "$work" || exit 1
export LD_LIBRARY_PATH=$work/lib:$root/.devrun/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
command -v nvidia-smi > /dev/null && nvidia-smi -L
[ -f "$dir/provenance.txt" ] && cp "$dir/provenance.txt" "$out/" && cat "$dir/provenance.txt"
also=()
# The same executable with its step launched kernel by kernel.
printf '#!/bin/sh\nWEFT_CUDA_GRAPHS=0 exec "%s/train" "$@"\n' "$work" > "$work/train_nographs"
chmod +x "$work/train_nographs"
# And with its GEMMs unpadded (docs/gpu.md, WEFT_CUDA_PAD_GEMMS).
printf '#!/bin/sh\nWEFT_CUDA_PAD_GEMMS=0 exec "%s/train" "$@"\n' "$work" > "$work/train_nopad"
chmod +x "$work/train_nopad"
for e in "$work"/train_*; do
  case $e in *.weights.safetensors) continue ;; esac
  [ -x "$e" ] && also+=(--also-exe "$e:${e##*/train_}")
done
timeout -s TERM 300 $py bench/gpu_train_step.py --exe "$work/train" \
  --pack "$dir/train.weights.pack" --out "$out" "${also[@]}" "$@" 2>&1 | tee "$out/bench.log"
rc=${PIPESTATUS[0]}
rm -rf "$work"
exit $rc
