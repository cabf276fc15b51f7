"""`verl-swe export RUN_DIR`: a run's last checkpoint as a Hugging Face model folder, for the next stage's
model.path (RFT -> stage 1 -> stage 2) and for `verl-swe eval` (`vllm serve` it).

verl's SFT trainer (RFT) saves `global_step_N/` with the FSDP shards; the PPO trainer saves the actor's
under `global_step_N/actor/`; `latest_checkpointed_iteration.txt` names the last. When the checkpoint holds
a full HF model (checkpoint.save_contents with `hf_model`) it is copied; otherwise verl's own merger builds
it from the shards (`python -m verl.model_merger merge --backend fsdp`, bf16). Either way config.json keeps
the stage's override_config (YaRN, max_position_embeddings), so the export serves at the stage's context.
The folder appears whole or not at all (written beside it, then renamed); `export.json` records its source.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)
RECORD = "export.json"


class ExportError(RuntimeError):
    pass


def checkpoint_dir(run_dir: Path, step: int | None = None) -> tuple[Path, int]:
    """The model checkpoint of `step` (default: the last one verl recorded) and its step."""
    run_dir = Path(run_dir)
    if step is None:
        marker = run_dir / "latest_checkpointed_iteration.txt"
        if not marker.is_file():
            raise ExportError(f"{run_dir}: no {marker.name} (no finished checkpoint); pass --step")
        step = int(marker.read_text().strip())
    folder = run_dir / f"global_step_{step}"
    if not folder.is_dir():
        raise ExportError(f"{folder} does not exist (steps here: {sorted(p.name for p in run_dir.glob('global_step_*'))})")
    actor = folder / "actor"
    return (actor if actor.is_dir() else folder), step


def _has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def export(run_dir: Path, out: Path | None = None, step: int | None = None, merge: bool = False) -> Path:
    """Write the HF model of `run_dir`'s checkpoint to `out` (default RUN_DIR/hf); return `out`."""
    ckpt, step = checkpoint_dir(run_dir, step)
    out = Path(out) if out else Path(run_dir) / "hf"
    source = "merger" if merge or not _has_weights(ckpt / "huggingface") else "copy"
    if (out / RECORD).is_file():
        done = json.loads((out / RECORD).read_text())
        if done.get("checkpoint") == str(ckpt.resolve()):
            logger.info("%s already holds %s", out, ckpt)
            return out
        raise ExportError(f"{out} holds another export ({done.get('checkpoint')}): remove it or pick --out")
    if out.exists():
        raise ExportError(f"{out} exists and is not an export: remove it or pick --out")
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    if source == "copy":
        shutil.copytree(ckpt / "huggingface", tmp)
    else:
        cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(ckpt),
               "--target_dir", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not _has_weights(tmp):
            raise ExportError(f"verl's model merger failed on {ckpt} (exit {done.returncode}):\n"
                              f"{(done.stdout + done.stderr)[-3000:]}")
    (tmp / RECORD).write_text(json.dumps({"checkpoint": str(ckpt.resolve()), "step": step, "source": source}, indent=1))
    tmp.rename(out)
    return out
