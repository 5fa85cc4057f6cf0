#!/bin/bash
# Every generated kernel of one training step on the GPU against the CPU
# executable's (docs/gpu.md, "Checking kernels"), from the repository root:
#   bash bench/gpu_kernel_check.sh prepare   # here, after a build
#   bash bench/gpu_kernel_check.sh run       # on the lent GPU machine
# prepare compiles, with weftc --dump-kernel-outputs, the test MLP, the test
# GPT decoder (fp32, bf16) and the 2-layer d256 GPT of bench/gpu_prepare.sh
# (fp32, bf16) for --target cuda, runs the small models' CPU executables for
# one step on their batch with WEFT_DUMP_KERNELS, and packs the CUDA
# executables, the batches, those dumps and test/lib/compare_kernel_dumps.py
# into .devrun/kernels.tar.xz (about 12 MB). The d256 GPT's dumps are
# ~100 MB a precision, too much to carry: its CPU executables go instead,
# and run there first.
# run (after bench/gpu_device_check.sh unpacked small.tar.xz's libraries
# into /tmp/small/lib, or alone: it unpacks them) runs each CUDA executable
# for the same step with WEFT_DUMP_KERNELS and compares its dumps with the
# CPU's (fp32 within 1e-5 of each tensor's largest magnitude, bf16 within
# 3e-2): one line per model, the tables in $OUT/kernels/ (OUT as the device
# tool sets it, else /tmp/out). The exit status is 1 if any model failed.
# AdamW's epsilon is 1e-3 (test/e2e/gpu/cuda-kernel-check.test says why).
set -euo pipefail
root=$(pwd); D=$root/.devrun
# model precision lr
runs=("mlp fp32 0.01" "gpt fp32 0.01" "gpt bf16 0.01" "mid fp32 0.001" "mid bf16 0.001")

prepare() {
  local W=/tmp/kernelprep PY=/usr/bin/python3 WEFTC=$root/build/bin/weftc
  rm -rf $W && mkdir -p $W $D && cd $W
  for m in mlp gpt; do
    $PY $root/test/lib/torch_reference.py export $m --out $m --no-constant-folding \
      + train $m --onnx $m/$m.onnx --out $m/run --steps 1 --lr 0.01 \
        --optimizer adamw > /dev/null
    $PY $root/test/lib/exe_check.py concat $m/run --steps 1 --data $m/x.npy \
      --labels $m/y.npy
  done
  $PY $root/bench/export_gpt.py --out mid --layers 2 --embd 256 --heads 4 --vocab 512 \
    --block 128 --batch 4 > /dev/null
  $PY -c "
import numpy as np
r = np.random.default_rng(0); t = r.integers(0, 512, size=(4, 129))
np.save('mid/x.npy', t[:, :128].astype(np.int64)); np.save('mid/y.npy', t[:, 1:].astype(np.int64))"
  local packed=()
  for run in "${runs[@]}"; do
    set -- $run; local m=$1 p=$2 lr=$3 onnx=$1/$1.onnx weights=""
    # The d256 GPT's four executables share one weights file (tar keeps
    # hard links once).
    [ $m = mid ] && onnx=mid/gpt.onnx weights="--embed-weights-limit 0"
    $WEFTC $onnx --optimizer adamw --eps 1e-3 --precision $p --dump-kernel-outputs $weights \
      -o $m/cpu_$p 2> /dev/null
    $WEFTC $onnx --optimizer adamw --eps 1e-3 --precision $p --dump-kernel-outputs $weights \
      --target cuda -o $m/cuda_$p 2> /dev/null
    packed+=($m/cuda_$p $m/x.npy $m/y.npy)
    if [ $m = mid ]; then
      for e in cpu_$p cuda_$p; do
        if [ $e != cpu_fp32 ] &&
           cmp -s mid/cpu_fp32.weights.safetensors mid/$e.weights.safetensors; then
          ln -f mid/cpu_fp32.weights.safetensors mid/$e.weights.safetensors
        fi
        packed+=(mid/$e.weights.safetensors)
      done
      packed+=($m/cpu_$p)
    else
      WEFT_DUMP_KERNELS=$m/cpu_$p.dump $m/cpu_$p --data $m/x.npy --labels $m/y.npy \
        --steps 1 --lr $lr --no-shuffle > /dev/null 2>&1
      packed+=($m/cpu_$p.dump)
      echo "$m $p: $(ls $m/cpu_$p.dump | wc -l) kernel outputs"
    fi
  done
  cp $root/test/lib/compare_kernel_dumps.py .
  tar -cJf $D/kernels.tar.xz compare_kernel_dumps.py \
    $(printf '%s\n' "${packed[@]}" | sort -u)
  ls -la $D/kernels.tar.xz
}

run() {
  local S=/tmp/kernels R=${OUT:-/tmp/out}/kernels failed=0
  rm -rf $S && mkdir -p $S $R
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    $D/kernels.tar.xz $S
  local lib=/tmp/small/lib
  if [ ! -d $lib ]; then
    python3 -c "
import tarfile, sys
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], members=[m for m in t.getmembers() if m.name.startswith('lib/')])" \
      $D/small.tar.xz $S
    lib=$S/lib
  fi
  local cublas
  cublas=$(python3 -c "import nvidia, glob; print(':'.join(sorted(glob.glob(list(nvidia.__path__)[0] + '/*/lib'))))" 2> /dev/null || true)
  export LD_LIBRARY_PATH=$lib:/usr/local/cuda/lib64:${cublas:-}:${LD_LIBRARY_PATH:-}
  cd $S
  for run in "${runs[@]}"; do
    set -- $run; local m=$1 p=$2 lr=$3 rc=0
    local args="--data $m/x.npy --labels $m/y.npy --steps 1 --lr $lr --no-shuffle"
    if [ -x $m/cpu_$p ]; then
      WEFT_DUMP_KERNELS=$m/cpu_$p.dump timeout 120 ./$m/cpu_$p $args > /dev/null 2>&1 || rc=$?
    fi
    WEFT_DUMP_KERNELS=$m/cuda_$p.dump timeout 120 ./$m/cuda_$p $args \
      > $R/${m}_${p}_run.txt 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
      echo "kernel check $m $p: an executable failed (rc $rc): $(tail -1 $R/${m}_${p}_run.txt)"
      failed=1; continue
    fi
    python3 compare_kernel_dumps.py $m/cpu_$p.dump $m/cuda_$p.dump --top 15 \
      > $R/${m}_$p.txt 2>&1 || { rc=$?; failed=1; }
    echo "kernel check $m $p: $([ $rc -eq 0 ] && echo ok || echo FAILED)" \
      "$(grep -E ' kernel calls, |^error:' $R/${m}_$p.txt | tr '\n' ' ')"
  done
  return $failed
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: bash bench/gpu_kernel_check.sh prepare|run" >&2; exit 2 ;;
esac
