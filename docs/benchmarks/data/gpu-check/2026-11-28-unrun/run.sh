#!/bin/bash
# One lease: selfcheck, trainers against PyTorch in one run, GPT-2 fused head A/B,
# PyTorch's kernel profile of VGG-16. Everything lands in $OUT as it goes.
set -u
T0=$(date +%s)
D=$(cd "$(dirname "$0")" && pwd)
P=/tmp/p
mkdir -p $P $OUT/logs $OUT/algos
t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/console.txt; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/console.txt
tar -xJf $D/pack.tar.xz -C $P || { t "unpack failed"; exit 1; }
PY=python3
export LD_LIBRARY_PATH=$($PY -c "import sys; sys.path.insert(0,'$P/py'); import runner; print(runner.library_path('$P'))")
$PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" | tee -a $OUT/console.txt
timeout 120 $P/bin/memfit_cuda_selfcheck > $OUT/logs/selfcheck.log 2>&1
t "selfcheck rc=$? $(grep -c MISMATCH $OUT/logs/selfcheck.log) mismatch lines; $(tail -1 $OUT/logs/selfcheck.log)"
grep -E "^selfcheck|MISMATCH|NOT RUN" $OUT/logs/selfcheck.log | head -20 | tee -a $OUT/console.txt
mkdir -p $P/filled
$PY - <<PYEOF >> $OUT/console.txt 2>&1
import sys; sys.path.insert(0, '$P/py'); import models
for n in ("vgg16", "resnet50"):
    s = '$P/models/%s.onnx' % n
    models.fill(n, s, s + '.params.json', '$P/filled/%s.onnx' % n)
PYEOF
t "filled"
tr() { # id [extra args]
  local id=$1; shift
  local m=${id%%-*}
  timeout 90 $P/trainers/$id/trainer --model $P/filled/$m.onnx --synthetic --iterations 30 --log-every 10 \
    --conv-algos $OUT/algos/$id.json "$@" > $OUT/logs/$id.log 2>&1
  t "$id rc=$? $(grep '^iteration 30' $OUT/logs/$id.log) | $(grep -o 'convolution engines.*' $OUT/logs/$id.log | head -1)"
}
ts() { # model prec
  timeout 90 $PY -u $P/py/torch_side.py speed $1 64 $2 30 > $OUT/logs/torch-$1-$2.log 2>&1
  t "torch $1 $2 rc=$? $(tail -1 $OUT/logs/torch-$1-$2.log)"
}
for pr in bf16 fp32; do tr vgg16-$pr-100; ts vgg16 $pr; tr vgg16-$pr-50; done
timeout 60 $PY $D/torch_prof.py $P/py vgg16 64 fp32 $OUT/torch-prof-vgg16-fp32.txt > $OUT/logs/prof.log 2>&1
t "torch profile rc=$?"
# GPT-2 124M, batch 8, T 1024, bf16: the fused head against the head as written.
$PY -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$D/gpt/gpt2.onnx.xz'), open('$P/gpt2-zero.onnx','wb'))"
$PY $D/fill_gpt.py $P/gpt2-zero.onnx $P/gpt2.onnx >> $OUT/console.txt 2>&1
mkdir -p $P/gpt && tar -xJf $D/gpt-trainers.tar.xz -C $P/gpt
t "gpt filled"
for g in fuse-false-100 fuse-true-100 fuse-false-50 fuse-auto-50; do
  timeout 90 $P/gpt/$g --model $P/gpt2.onnx --synthetic --iterations 30 --log-every 10 > $OUT/logs/gpt-$g.log 2>&1
  t "gpt $g rc=$? $(grep '^iteration 30' $OUT/logs/gpt-$g.log)"
done
for pr in bf16 fp32; do tr resnet50-$pr-100; ts resnet50 $pr; tr resnet50-$pr-50; done
tr vgg16-tf32-100; ts vgg16 tf32; tr resnet50-tf32-100; ts resnet50 tf32; tr vgg16-tf32-50; tr resnet50-tf32-50
MEMFIT_CUDA_PROFILE=1 timeout 60 $P/trainers/vgg16-fp32-100/trainer --model $P/filled/vgg16.onnx --synthetic --iterations 3 --log-every 1 > $OUT/logs/prof-vgg16-fp32-100.log 2>&1
t "memfit profile rc=$?"
t done
