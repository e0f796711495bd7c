#!/usr/bin/env bash
# The zoo's gpt2-tiny is GPT-2: trained 3 steps on the CPU emulation, it
# agrees with Hugging Face's GPT-2 written by hand in PyTorch with the same
# weights (tests/e2e/zoo_llm.sh).
set -u
MEMFIT=$1
WORK=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
source "$SRC/tests/e2e/zoo_llm.sh"
zoo_llm_check gpt2-tiny gpt2 4 4
