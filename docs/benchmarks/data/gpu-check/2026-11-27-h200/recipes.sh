# issue 35's trainer flags on the GPU against the CPU emulation's logs
# (run in the unpacked rec/ folder; LD_LIBRARY_PATH set by the caller).
IMAGENET=0.485,0.456,0.406/0.229,0.224,0.225
NANO=(--tokens train.bin --seq-len 16 --lr 0.01 --eps 1e-3 --weight-decay 0.1 --no-decay auto --lr-schedule cosine --warmup-steps 2 --min-lr 0.001)
D=$(dirname "$0")
mkdir -p gpu
go() { # name bin args...
  local n=$1 b=$2; shift 2
  local t0=$(date +%s.%N)
  timeout 60 ./bin/$b --model $b.onnx "$@" >gpu/$n.log 2>&1; local rc=$?
  echo "== $n rc=$rc $(python3 -c "print('%.1f s' % ($(date +%s.%N)-$t0))")"
  [ $rc = 0 ] || tail -5 gpu/$n.log
  python3 $D/cmp.py $n cpu/$n.log gpu/$n.log
}
go lmval adamw --iterations 8 --log-every 1 "${NANO[@]}" --clip-grad-norm 1 --val-tokens val16.bin --val-every 4 --save gpu/lmval.onnx --log gpu/lmval.jsonl
go acc accumulate --iterations 8 --log-every 1 "${NANO[@]}" --clip-grad-norm 1 --save gpu/acc.onnx
go bn_acc bn_acc --data img_ref.npy --labels lab64.npy --iterations 4 --lr 0.05 --log-every 1 --save gpu/bn_acc.onnx
go bn_val bn_val --data img_u8.npy --labels lab64.npy --normalize $IMAGENET --val-data val_u8.npy --val-labels val_lab.npy --val-every 2 --iterations 4 --lr 0.05 --log-every 1 --save gpu/bn_val.onnx --log gpu/bn_val.jsonl
go drop drop --data mlp_x.npy --labels mlp_y.npy --val-data mlp_vx.npy --val-labels mlp_vy.npy --iterations 5 --lr 0.1 --save gpu/drop_t.onnx
go rrc cnn --iterations 6 --lr 0.05 --data img12.npy --labels lab64.npy --normalize $IMAGENET --random-resized-crop --hflip --iterations 6 --save gpu/rrc.onnx
