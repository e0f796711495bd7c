#!/usr/bin/env bash
# The zoo's llama-tiny is a Llama with grouped-query attention (4 heads, 2
# key/value heads): trained 3 steps on the CPU emulation, it agrees with
# Hugging Face's Llama written by hand in PyTorch with the same weights
# (tests/e2e/zoo_llm.sh).
set -u
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
source "$SRC/tests/e2e/zoo_llm.sh"
zoo_llm_check llama-tiny llama 4 2
