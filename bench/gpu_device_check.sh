#!/bin/bash
# On a lent GPU machine, from the repository root, after bench/gpu_prepare.sh
# built .devrun/ elsewhere: the runtime's CUDA and NCCL unit tests, the small
# models' 20 (10) steps with their metrics (one-rank meshes on NCCL too), a
# profiled run of the test GPT,
# then GPT-2 124M against PyTorch (bench/gpu_bench.sh, eager by default,
# TORCH_MODES=eager,compile for both) with a profiled run. Everything goes
# into one tarball, $OUT/all.tgz (the device tool returns few files); read
# it with bench/gpu_compare.py. About 50 s on an H100 (eager only).
set -u
root=$(pwd); D=$root/.devrun
FINAL=${OUT:-/tmp/out}; OUT=/tmp/devout; rm -rf $OUT; mkdir -p $OUT $FINAL
export OUT
trap 'tar -czf $FINAL/all.tgz -C $OUT .' EXIT
exec > >(tee $OUT/run.log) 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
echo "tools: $(command -v nsys ncu cuobjdump python3 | tr '\n' ' ')"
python3 -c "import torch, numpy; print('torch', torch.__version__, torch.version.cuda)"
S=/tmp/small; rm -rf $S; mkdir -p $S
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $D/small.tar.xz $S
cublas=$(python3 -c "import nvidia, glob; print(':'.join(sorted(glob.glob(list(nvidia.__path__)[0] + '/*/lib'))))" 2>/dev/null)
echo "pip CUDA libraries: $cublas"
export LD_LIBRARY_PATH=$S/lib:/usr/local/cuda/lib64:${cublas:-}:${LD_LIBRARY_PATH:-}
cd $S
timeout 60 ./WeftRuntimeCudaTests --gtest_brief=1 2>&1 | tail -15
timeout 60 ./WeftRuntimeNcclTests --gtest_brief=1 2>&1 | tail -8
for e in mlp/cuda gpt/cuda gpt/cuda_bf16 mlp/cuda_mesh mlp/cuda_mesh_z3 mlp/cuda_mesh_z2 \
         gpt/cuda_mesh gpt/cuda_mesh_z3 gpt/cuda_mesh_z2; do
  m=${e%%/*}; n=$(echo $e | tr / _)
  # A mesh's final parameters too (gpu_compare.py: against the CPU's).
  ck=(); case $e in *mesh*) ck=(--checkpoint-dir $OUT/ck_$n --checkpoint-every 20);; esac
  t0=$(date +%s%N)
  timeout 60 ./$e --data $m/x.npy --labels $m/y.npy --steps 20 --lr 0.01 --no-shuffle \
    --metrics $OUT/$n.jsonl "${ck[@]}" 2>&1 | tail -3
  echo "$e: rc ${PIPESTATUS[0]} $(( ($(date +%s%N) - t0) / 1000000 )) ms"
done
# Pipelines: two ranks on the one GPU, through weftrun.
for e in pipe/cuda_pp2 pipe/cuda_pp2_interleaved; do
  n=$(echo $e | tr / _)
  timeout 90 ./weftrun --nproc-per-node 2 --master-port 29731 ./$e --data gpt/x.npy --labels gpt/y.npy \
    --steps 20 --lr 0.01 --no-shuffle --metrics $OUT/$n.jsonl \
    --checkpoint-dir $OUT/ck_$n --checkpoint-every 20 2>&1 | tail -4
  echo "$e: rc ${PIPESTATUS[0]}"
done
for e in cuda_fp32 cuda_bf16 cuda_fa_fp32 cuda_fa_bf16; do
  timeout 60 ./mid/$e --data mid/x.npy --labels mid/y.npy --steps 10 --lr 0.001 --no-shuffle \
    --metrics $OUT/mid_$e.jsonl 2>&1 | tail -1
done
# Each generated kernel of one step against the CPU executable's.
(cd $root && timeout 240 bash bench/gpu_kernel_check.sh run)
# CUDA graphs: off (WEFT_CUDA_GRAPHS=0) the same losses; the step time both
# ways; and a run stopped after a checkpoint taken with the next batch
# already fetched resumes with the uninterrupted run's losses.
WEFT_CUDA_GRAPHS=0 timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy --steps 20 \
  --lr 0.01 --no-shuffle --metrics $OUT/gpt_cuda_nographs.jsonl 2>&1 | tail -1
WEFT_CUDA_GRAPHS=0 timeout 60 ./mid/cuda_bf16 --data mid/x.npy --labels mid/y.npy --steps 10 \
  --lr 0.001 --no-shuffle --metrics $OUT/mid_cuda_bf16_nographs.jsonl 2>&1 | tail -1
for g in 1 0; do
  WEFT_CUDA_GRAPHS=$g timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy --steps 300 \
    --lr 0.001 --metrics $OUT/time_gpt_graphs$g.jsonl 2>&1 | tail -1
  WEFT_CUDA_GRAPHS=$g timeout 60 ./mid/cuda_bf16 --data mid/x.npy --labels mid/y.npy --steps 100 \
    --lr 0.001 --metrics $OUT/time_mid_graphs$g.jsonl 2>&1 | tail -1
done
rm -rf /tmp/ck
timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy --steps 12 --lr 0.01 \
  --metrics $OUT/resume_full.jsonl > /dev/null 2>&1
WEFT_FAULT=0:8:exit timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy --steps 12 \
  --lr 0.01 --checkpoint-dir /tmp/ck --checkpoint-every 5 > /dev/null 2>&1
echo "fault run: rc $? (3 expected)"
timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy --steps 12 --lr 0.01 \
  --checkpoint-dir /tmp/ck --metrics $OUT/resume_tail.jsonl 2>&1 | grep -i "resum" | head -2
WEFT_CUDA_PROFILE=$OUT/gpt_cuda_profile.txt timeout 60 ./gpt/cuda --data gpt/x.npy --labels gpt/y.npy \
  --steps 5 --lr 0.01 --no-shuffle > /dev/null 2>&1; head -12 $OUT/gpt_cuda_profile.txt
cd $root
BENCH_DIR=$D/gpt2 PYTHON=python3 timeout 360 bash bench/gpu_bench.sh --steps 15 --warmup 3 \
  --torch ${TORCH_MODES:-eager} --weft-timeout 60 --torch-timeout 45 --profile-steps 4
date -u
