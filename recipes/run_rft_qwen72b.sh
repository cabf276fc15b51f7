#!/usr/bin/env bash
# The paper's RFT on Qwen2.5-72B-Instruct: verl's SFT trainer (torchrun) on `verl-swe rft build` parquet.
#   RFT_TRAIN_FILES=sft.parquet NNODES=16 NODE_RANK=$i MASTER_ADDR=host0 bash recipes/run_rft_qwen72b.sh [overrides]
#   bash recipes/run_rft_qwen72b.sh --cfg job        print the composed config, start nothing
# Values and their sources: verl_swe/trainer/config/rft.yaml (rft_qwen72b.yaml selects them).
set -euo pipefail
CONFIG_DIR=$(python -c "import importlib.resources as r; print(r.files('verl_swe.trainer') / 'config')")
ARGS=(--config-path "$CONFIG_DIR" --config-name rft_qwen72b)
if [[ " $* " == *" --cfg "* ]]; then
  exec python -m verl.trainer.sft_trainer "${ARGS[@]}" "$@"  # composing needs no process group
fi
NNODES=${NNODES:-16} NPROC_PER_NODE=${NPROC_PER_NODE:-8}
exec torchrun --nnodes "$NNODES" --nproc_per_node "$NPROC_PER_NODE" --node_rank "${NODE_RANK:-0}" \
  --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "${MASTER_PORT:-29500}" \
  -m verl.trainer.sft_trainer "${ARGS[@]}" trainer.nnodes="$NNODES" trainer.n_gpus_per_node="$NPROC_PER_NODE" "$@"
