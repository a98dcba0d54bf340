"""A tiny Llama made on the spot, for vLLM's offline engine: random weights (seeded)
saved with safetensors, a byte-level BPE tokenizer trained with the ``tokenizers``
library on refengine's corpus. Nothing comes from a hub.

Sizes: hidden 64, 2 layers, 2 attention heads with 1 KV head (grouped-query, head size
32), intermediate 128, vocabulary 512, 256 positions.
"""

from __future__ import annotations

import json
from pathlib import Path

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "vocab_size": 512,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "float32",
}


def _tokenizer(folder: Path, corpus: str) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=CONFIG["vocab_size"],
                                  special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([corpus], trainer=trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "model_max_length": CONFIG["max_position_embeddings"]}))


def make_tiny_llama(folder: Path, corpus: str, seed: int = 0) -> Path:
    """Write the model into ``folder`` (config, safetensors weights, tokenizer)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=1))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1}))
    g = torch.Generator().manual_seed(seed)
    h, inter, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    d = CONFIG["head_dim"]
    q, kv = CONFIG["num_attention_heads"] * d, CONFIG["num_key_value_heads"] * d

    def w(*shape: int, scale: float) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * scale).contiguous()

    tensors = {"model.embed_tokens.weight": w(v, h, scale=1.0),
               "model.norm.weight": 1.0 + w(h, scale=0.1),
               "lm_head.weight": w(v, h, scale=h ** -0.5)}
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": 1.0 + w(h, scale=0.1),
            p + "post_attention_layernorm.weight": 1.0 + w(h, scale=0.1),
            p + "self_attn.q_proj.weight": w(q, h, scale=h ** -0.5),
            p + "self_attn.k_proj.weight": w(kv, h, scale=h ** -0.5),
            p + "self_attn.v_proj.weight": w(kv, h, scale=h ** -0.5),
            p + "self_attn.o_proj.weight": w(h, q, scale=q ** -0.5),
            p + "mlp.gate_proj.weight": w(inter, h, scale=h ** -0.5),
            p + "mlp.up_proj.weight": w(inter, h, scale=h ** -0.5),
            p + "mlp.down_proj.weight": w(h, inter, scale=inter ** -0.5),
        }
    save_file(tensors, str(folder / "model.safetensors"))
    _tokenizer(folder, corpus)
    return folder
