#!/usr/bin/env bash
# ctest fixture export_torchvision: exports the torchvision models that
# OnnxImportTorchvisionTest.cpp imports, each with its JSON sidecar of
# torch's own numbers. A model already exported by the current exporter is
# kept. Without torch in /usr/bin/python3 it says so and succeeds, and the
# import test then reports that it had nothing to check.
# Usage: export_torchvision.sh <export-torchvision.py> <output-dir>
set -euo pipefail
exporter=$1
out=$2
py=/usr/bin/python3

if ! [ -x "$py" ] || ! "$py" -c 'import torch, torchvision, onnx' 2>/dev/null; then
  echo "export_torchvision: SKIPPED: $py cannot import torch, torchvision and onnx;"
  echo "the torchvision import test has nothing to check"
  rm -f "$out"/*.onnx.json
  exit 0
fi
mkdir -p "$out"

# Exports outlive a build directory in a cache keyed by the exporter's text
# and torch's versions (a fresh clone's build, CI's, would otherwise spend
# six minutes of torch on them again). MEMFIT_TEST_CACHE=off turns it off.
cache_root=${MEMFIT_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memfit}
versions=$("$py" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)')
exporter_key=$( { cat "$exporter"; echo "$versions"; } | sha256sum | cut -c1-16)

# A hard link where the cache shares the file system, else a copy.
link_or_copy() { # from to
  ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"
}

# Keeps $out's export of a model in the cache entry $1.
keep() { # cache file
  local f
  mkdir -p "$1.tmp" || return 0
  for f in "$out/$2" "$out/$2.data" "$out/$2.json"; do
    if [ -f "$f" ]; then
      link_or_copy "$f" "$1.tmp/" || true
    fi
  done
  { rm -rf "$1" && mv "$1.tmp" "$1"; } || rm -rf "$1.tmp"
}

export_model() {
  local name=$1 file=$2
  shift 2
  local cache=
  [ "$cache_root" = off ] ||
    cache=$cache_root/torchvision/$exporter_key-$(echo "$name $*" | sha256sum | cut -c1-16)
  if [ "$out/$file.json" -nt "$exporter" ] && [ "$out/$file" -nt "$exporter" ]; then
    echo "up to date: $file"
    if [ -n "$cache" ] && ! [ -f "$cache/$file.json" ]; then keep "$cache" "$file"; fi
    return
  fi
  rm -f "$out/$file.json"
  if [ -n "$cache" ]; then
    if [ -f "$cache/$file.json" ] && [ -f "$cache/$file" ]; then
      local f ok=1
      # Touched, so that they are newer than the exporter.
      for f in "$cache"/*; do
        link_or_copy "$f" "$out/$(basename "$f")" &&
          touch "$out/$(basename "$f")" || ok=
      done
      # The sidecar last: its date is what marks the model up to date.
      [ -n "$ok" ] && touch "$out/$file.json" && { echo "from the cache: $file"; return; }
    fi
  fi
  echo "exporting $name -> $file $*"
  # A new file, never one rewritten in place: it may be a link into the
  # cache.
  rm -f "$out/$file" "$out/$file.data"
  "$py" "$exporter" "$name" "$out/$file" "$@"
  if [ -n "$cache" ]; then
    # Entries of another exporter or torch are stale: 1.2 GB each.
    find "$cache_root/torchvision" -mindepth 1 -maxdepth 1 \
      ! -name "$exporter_key-*" -exec rm -rf {} + 2>/dev/null || true
    keep "$cache" "$file"
  fi
}

# Together these cover: dynamic and fixed batch, opsets 11, 13 and 17,
# external data, eval-mode exports (inference BatchNorm, deduplicated
# initializers) and a training-mode export (Dropout kept).
export_model resnet18 resnet18.onnx --external-data
export_model alexnet alexnet-train.onnx --train --batch 4
export_model googlenet googlenet.onnx
export_model mobilenet_v2 mobilenet_v2.onnx --opset 17
export_model squeezenet1_0 squeezenet1_0.onnx --opset 11
export_model densenet121 densenet121.onnx
# Today's architectures (opset 17: LayerNormalization, HardSwish).
export_model vit_b_16 vit_b_16.onnx --opset 17
export_model convnext_tiny convnext_tiny.onnx --opset 17
export_model efficientnet_b0 efficientnet_b0.onnx --opset 17
export_model mobilenet_v3_small mobilenet_v3_small-train.onnx --opset 17 --train --batch 4
export_model regnet_y_400mf regnet_y_400mf.onnx --opset 17
export_model shufflenet_v2_x0_5 shufflenet_v2_x0_5.onnx --opset 17
# Shifted windows: a mask built by ScatterND, strided Slices (patch merging).
export_model swin_t swin_t.onnx --opset 17
# Segmentation: dilated convolutions, bilinear Resize to the input's size.
export_model segmentation.fcn_resnet50 fcn_resnet50.onnx --opset 17
export_model segmentation.lraspp_mobilenet_v3_large lraspp_mobilenet_v3_large.onnx --opset 17
export_model segmentation.deeplabv3_mobilenet_v3_large deeplabv3_mobilenet_v3_large.onnx --opset 13
