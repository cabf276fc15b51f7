"""Tiny random-weight Qwen2 models with the real Qwen tokenizer's vocabulary (CPU tests and demos)."""

from __future__ import annotations


def tiny_qwen2(vocab_size: int, hidden_size: int = 64, layers: int = 2, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=hidden_size * 2,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32_768, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval()
