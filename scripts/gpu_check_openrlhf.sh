#!/usr/bin/env bash
# GPU check: OpenRLHF (Ray + vLLM) on ONE GPU, training a tiny model built offline on mcpworld episodes served
# by `mcpworld up`, for a few steps; prints the reward curve from the bridge's rollout log.
#
#   bash scripts/gpu_check_openrlhf.sh            # needs: a CUDA GPU; torch, vllm, ray, deepspeed, openrlhf
#                                                 # (pip install -e '.[train,openrlhf,gpu]' openrlhf ray deepspeed)
# Env: STEPS (default 3 prompt batches), WORLD (default airline), PORT (default 8765), OUT (default a temp dir).
# Nothing is downloaded: the model is random (Llama architecture, a tokenizer trained on the world's prompts),
# so the curve shows the pipeline working end to end (rewards, format penalties, no infra errors), not learning.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-3}
WORLD=${WORLD:-airline}
PORT=${PORT:-8765}
OUT=${OUT:-$(mktemp -d /tmp/mcpworld-gpu-check.XXXXXX)}
PY=${PYTHON:-python}
mkdir -p "$OUT"
echo "gpu-check: output in $OUT"

"$PY" - <<'PYEOF'
import importlib, sys
missing = [m for m in ("torch", "vllm", "ray", "deepspeed", "openrlhf") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu-check: missing {', '.join(missing)}; install them first (see the header of this script)")
import torch
if not torch.cuda.is_available():
    sys.exit("gpu-check: no CUDA GPU visible")
print(f"gpu-check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
PYEOF

export MCPWORLD_HOME="$OUT/home"
export MCPWORLD_REGISTRY_TOKEN=${MCPWORLD_REGISTRY_TOKEN:-gpu-check-token}
"$PY" -m mcpworld up --port "$PORT" --no-swe > "$OUT/up.log" 2>&1 &
UP=$!
trap 'kill $UP 2>/dev/null || true; ray stop --force >/dev/null 2>&1 || true' EXIT
for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    kill -0 $UP 2>/dev/null || { cat "$OUT/up.log"; exit 1; }
    sleep 1
done
export MCPWORLD_REGISTRY="http://127.0.0.1:$PORT"

"$PY" -m mcpworld train openrlhf-data --server "$WORLD" --registry "$MCPWORLD_REGISTRY" -o "$OUT/prompts.jsonl"

"$PY" - "$OUT" <<'PYEOF'
import json, sys
from mcpworld.trainer.tiny import save_tiny_chat_model
out = sys.argv[1]
rows = [json.loads(line) for line in open(f"{out}/prompts.jsonl")]
corpus = [m["content"] for r in rows for m in r["prompt"]] * 4
save_tiny_chat_model(f"{out}/model", corpus, style="qwen2.5", max_len=4096)
print(f"gpu-check: tiny model in {out}/model ({len(rows)} prompts)")
PYEOF

PROMPTS=$(wc -l < "$OUT/prompts.jsonl")
BATCH=4
SAMPLES=4
export MCPWORLD_ROLLOUT_LOG="$OUT/rollouts.jsonl"
export MCPWORLD_INFRA_BACKOFF_S=1
"$PY" -m mcpworld train openrlhf --data "$OUT/prompts.jsonl" --pretrain "$OUT/model" -o "$OUT/ckpt" \
    --gpus 1 --samples "$SAMPLES" --max-len 4096 --max-reply-tokens 128 --registry "$MCPWORLD_REGISTRY" --run -- \
    --rollout.batch_size "$BATCH" --rollout.micro_batch_size 2 --train.batch_size $((BATCH * SAMPLES)) \
    --train.micro_batch_size 2 --data.max_samples $((BATCH * STEPS < PROMPTS ? BATCH * STEPS : PROMPTS)) \
    --train.num_episodes 1 --train.max_epochs 1 --vllm.gpu_memory_utilization 0.3 --vllm.enforce_eager \
    --ds.zero_stage 0 --ds.param_dtype bf16 --actor.adam.lr 1e-5 --ckpt.save_steps -1 \
    2>&1 | tee "$OUT/openrlhf.log" | grep -E "reward|Error|error|step" | tail -40 || true

"$PY" - "$OUT" "$((BATCH * SAMPLES))" <<'PYEOF'
import json, sys
from collections import Counter
out, per_step = sys.argv[1], int(sys.argv[2])
try:
    rows = [json.loads(line) for line in open(f"{out}/rollouts.jsonl")]
except FileNotFoundError:
    sys.exit("gpu-check: FAILED, no rollout finished (see openrlhf.log)")
print(f"gpu-check: {len(rows)} rollouts; endings: {dict(Counter(r['termination'] for r in rows))}")
print("gpu-check: reward curve (mean reward per step of", per_step, "rollouts)")
for i in range(0, len(rows), per_step):
    chunk = rows[i:i + per_step]
    print(f"  step {i // per_step + 1}: {sum(r['reward'] for r in chunk) / len(chunk):+.3f}  "
          f"infra_error {sum(r.get('infra_error', 0) for r in chunk):.0f}")
PYEOF
