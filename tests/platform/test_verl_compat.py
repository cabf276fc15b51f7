"""The paper's YaRN override goes through verl's own config path on transformers 5 (verl_swe/verl_compat.py)."""

import subprocess
import sys
import textwrap


def test_yarn_override_reaches_the_model_through_verls_hf_model_config(tmp_path):
    # A fresh interpreter: the patch applies when verl.utils.model is first imported (the plugin's hook).
    code = textwrap.dedent(f"""
        import json
        from transformers import Qwen2Config, Qwen2ForCausalLM
        Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                    num_key_value_heads=1, max_position_embeddings=32768, rope_theta=1e6,
                    architectures=["Qwen2ForCausalLM"]).save_pretrained({str(tmp_path)!r})
        from verl.workers.config.model import HFModelConfig
        cfg = HFModelConfig(path={str(tmp_path)!r}, override_config={{"attn_implementation": "sdpa",
              "rope_scaling": {{"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}}}})
        rotary = Qwen2ForCausalLM(cfg.hf_config).model.rotary_emb
        print(json.dumps([cfg.hf_config.rope_parameters, rotary.rope_type, rotary.attention_scaling]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    params, rope_type, scaling = eval(out.stdout.strip().splitlines()[-1].replace("true", "True"))  # noqa: S307
    assert params == {"rope_theta": 1e6, "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}
    assert rope_type == "yarn" and scaling > 1.0  # YaRN's attention temperature: the override took effect
