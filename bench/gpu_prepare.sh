#!/bin/bash
# Builds, on a machine without a GPU, what bench/gpu_device_check.sh needs on
# a lent GPU machine (docs/gpu.md, "Benchmark"), from the repository root:
#   bash bench/gpu_prepare.sh [--quick]
# - the test MLP and GPT decoder (fp32, bf16) and a 2-layer d256 GPT (fp32,
#   bf16) compiled --target cuda, their batches, and the CPU executable's
#   losses, the reference evaluator's and PyTorch's (in $W, /tmp/devprep:
#   bench/gpu_compare.py reads them), packed with the runtime's CUDA unit
#   tests into .devrun/small.tar.xz; one-rank --mesh builds of the MLP and
#   GPT (every collective through NCCL) among them;
# - the kernel check's executables and CPU dumps (bench/gpu_kernel_check.sh)
#   in .devrun/kernels.tar.xz;
# - the GPT-2 124M bundle (bench/gpu_bundle.sh) in .devrun/gpt2.
# .devrun/ (about 40 MB) is ignored by git: the device tool's run carries it
# when asked (carry [".devrun"]). --quick recompiles the GPU executables
# only; the CPU references stay.
set -euo pipefail
root=$(pwd); D=$root/.devrun; W=/tmp/devprep
mkdir -p $D
PY=/usr/bin/python3; WEFTC=$root/build/bin/weftc
flags="--optimizer adamw --eps 1e-6 --clip-norm 0.8 --lr-schedule warmup --warmup-steps 4"
if [ "${1:-}" != "--quick" ]; then
  rm -rf $W && mkdir -p $W/small
  cd $W/small
  for m in mlp gpt; do
    $PY $root/test/lib/torch_reference.py export $m --out $m --no-constant-folding \
      + train $m --onnx $m/$m.onnx --out $m/run --steps 20 --lr 0.01 $flags > /dev/null
    $PY $root/test/lib/exe_check.py concat $m/run --steps 20 --data $m/x.npy --labels $m/y.npy
  done
  $PY $root/bench/export_gpt.py --out mid --layers 2 --embd 256 --heads 4 --vocab 512 \
    --block 128 --batch 4 > /dev/null
  $PY -c "
import numpy as np
r = np.random.default_rng(0); t = r.integers(0, 512, size=(40, 129))
np.save('mid/x.npy', t[:, :128].astype(np.int64)); np.save('mid/y.npy', t[:, 1:].astype(np.int64))"
  # The CPU executables' losses, which the GPU's are compared with.
  for run in "mlp fp32 20 0.01 $flags" "gpt fp32 20 0.01 $flags" \
             "gpt bf16 20 0.01 $flags" "mid fp32 10 0.001 --optimizer adamw" \
             "mid bf16 10 0.001 --optimizer adamw"; do
    set -- $run
    m=$1 p=$2 steps=$3 lr=$4; shift 4
    onnx=$m/$m.onnx; [ $m = mid ] && onnx=mid/gpt.onnx
    $WEFTC $onnx --precision $p "$@" -o $m/cpu_$p 2> /dev/null
    $m/cpu_$p --data $m/x.npy --labels $m/y.npy --steps $steps --lr $lr --no-shuffle \
      --metrics $m/cpu_$p.jsonl > /dev/null
  done
  # The reference evaluator's 20 steps on the same batches (the training
  # step weftc --emit=train writes, run op by op on the host: the GPU's
  # losses and final parameters are compared with it too).
  for run in "mlp fp32 eval" "gpt fp32 eval" "gpt bf16 eval_bf16"; do
    set -- $run
    $WEFTC $1/$1.onnx --emit=train --precision $2 $flags -o $1/train_$2.mlir 2> /dev/null
    $PY $root/test/lib/weft_train_loop.py $1/train_$2.mlir --data $1/run --steps 20 \
      --lr 0.01 --out $1/$3 --weft-eval $root/build/bin/weft-eval > /dev/null
  done
  # The final parameters of the 1-rank CPU runs, which the one-rank GPU
  # meshes' are compared with (bench/gpu_compare.py).
  for m in mlp gpt; do
    rm -rf $m/cpu_fp32.ckpt
    $m/cpu_fp32 --data $m/x.npy --labels $m/y.npy --steps 20 --lr 0.01 --no-shuffle \
      --checkpoint-dir $m/cpu_fp32.ckpt --checkpoint-every 20 > /dev/null
    $root/build/bin/weft-ckpt export $m/cpu_fp32.ckpt -o $m/cpu_fp32.safetensors > /dev/null
  done
  # The pipelines' reference: the 1-rank CPU step accumulating the same 4
  # micro-batches.
  mkdir -p pipe
  $WEFTC gpt/gpt.onnx $flags --accum-steps 4 -o pipe/cpu_fp32 2> /dev/null
  rm -rf pipe/cpu_fp32.ckpt
  pipe/cpu_fp32 --data gpt/x.npy --labels gpt/y.npy --steps 20 --lr 0.01 --no-shuffle \
    --metrics pipe/cpu_fp32.jsonl --checkpoint-dir pipe/cpu_fp32.ckpt --checkpoint-every 20 > /dev/null
  $root/build/bin/weft-ckpt export pipe/cpu_fp32.ckpt -o pipe/cpu_fp32.safetensors > /dev/null
fi
cd $W/small
for m in mlp gpt; do $WEFTC $m/$m.onnx --target cuda $flags -o $m/cuda 2> /dev/null; done
# A mesh of one rank keeps every collective: the NCCL path on one GPU
# (docs/gpu.md, "Meshes"), unbucketed, in small buckets and in default ones.
for m in mlp gpt; do
  $WEFTC $m/$m.onnx --target cuda --mesh dp=1 --bucket-mb 0 $flags -o $m/cuda_mesh 2> /dev/null
  $WEFTC $m/$m.onnx --target cuda --mesh dp=1 --zero 3 --bucket-mb 0.004 $flags \
    -o $m/cuda_mesh_z3 2> /dev/null
  $WEFTC $m/$m.onnx --target cuda --mesh dp=1 --zero 2 $flags -o $m/cuda_mesh_z2 2> /dev/null
done
$WEFTC gpt/gpt.onnx --target cuda --precision bf16 $flags -o gpt/cuda_bf16 2> /dev/null
# Pipelines on GPUs (two ranks share the one GPU: their transfers go
# through host memory), 1F1B and interleaved.
mkdir -p pipe
$WEFTC gpt/gpt.onnx --target cuda --mesh pp=2 $flags --accum-steps 4 -o pipe/cuda_pp2 2> /dev/null
$WEFTC gpt/gpt.onnx --target cuda --mesh pp=2 --schedule interleaved --virtual-stages 2 \
  $flags --accum-steps 4 -o pipe/cuda_pp2_interleaved 2> /dev/null
for p in fp32 bf16; do
  $WEFTC mid/gpt.onnx --target cuda --precision $p --optimizer adamw -o mid/cuda_$p 2> /dev/null
  # T 128 is below --fused-attention=auto's threshold: the GPU's fused
  # attention kernels, forced.
  $WEFTC mid/gpt.onnx --target cuda --precision $p --optimizer adamw --fused-attention=on \
    -o mid/cuda_fa_$p 2> /dev/null
done
rm -rf lib
mkdir -p lib
for f in mlp/cuda gpt/cuda gpt/cuda_bf16 mid/cuda_fp32 $root/build/unittests/WeftRuntimeCudaTests $root/build/unittests/WeftRuntimeNcclTests; do
  ldd $f | awk '$3 ~ /^\// {print $3}' |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libnccl|libcudart)\.so' |
    while read -r lib; do cp -L "$lib" lib/; done
done
cp $root/build/unittests/WeftRuntimeCudaTests $root/build/unittests/WeftRuntimeNcclTests .
cp $root/build/bin/weftrun .
tar -cJf $D/small.tar.xz mlp/cuda* mlp/x.npy mlp/y.npy gpt/cuda* gpt/x.npy gpt/y.npy mid/cuda_* mid/x.npy mid/y.npy \
  pipe/cuda_* lib WeftRuntimeCudaTests WeftRuntimeNcclTests weftrun
cd $root
# Each generated kernel against the CPU's (bench/gpu_kernel_check.sh run
# there): .devrun/kernels.tar.xz.
bash bench/gpu_kernel_check.sh prepare
# GPT-2 124M with (auto: T 1024) and without the fused attention kernels.
WEFT_BUNDLE_ALSO="--fused-attention=off:unfused" bash bench/gpu_bundle.sh $D/gpt2
ls -la $D $D/gpt2
