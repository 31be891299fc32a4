"""Build the vLLM tests' tiny random Llama in Hugging Face format (run with the vLLM venv's python).

``python vllm_model.py OUT SPEC.json``: SPEC gives the chat template, the control tokens
and the end-of-turn token (the dev side passes tiny-qwen3's: Qwen3's template with tools
and reasoning). OUT gets ``config.json``, ``model.safetensors`` (3M parameters, bfloat16,
seeded), ``tokenizer.json`` (byte-level BPE: the 256 byte tokens, a few merges, the
control tokens) and ``tokenizer_config.json`` with ``chat_template``. As in the built-in
GGUFs, residual channel 0 is a constant "bias channel" the end-of-turn token's output row
reads, so answers end on their own after a few dozen tokens.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n")]
EOS_BOOST = 1.5  # answers of 10 to 120 tokens at temperature 0.8
SHAPE = {"hidden": 128, "layers": 2, "heads": 4, "ff": 256, "context": 4096}


def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in of each byte, by byte."""
    visible = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    out, extra = [], 0
    for b in range(256):
        if b in visible:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return out


def build_tokenizer(out: Path, spec: dict) -> tuple[int, int]:
    """Write tokenizer.json and tokenizer_config.json; (vocabulary size, end-of-turn id)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(byte_alphabet())}
    for left, right in MERGES:
        vocab[left + right] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=MERGES))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True) for t in spec["special_tokens"]])
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": spec["chat_template"],
        "bos_token": None,
        "eos_token": spec["eos_token"],
        "pad_token": spec["eos_token"],
        "model_max_length": SHAPE["context"],
        "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return tok.get_vocab_size(), tok.token_to_id(spec["eos_token"])


def build_model(out: Path, n_vocab: int, eos: int) -> None:
    """Write config.json and seeded random bfloat16 weights with the bias channel."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=n_vocab,
        hidden_size=SHAPE["hidden"],
        intermediate_size=SHAPE["ff"],
        num_hidden_layers=SHAPE["layers"],
        num_attention_heads=SHAPE["heads"],
        num_key_value_heads=SHAPE["heads"],
        max_position_embeddings=SHAPE["context"],
        eos_token_id=eos,
        bos_token_id=None,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:  # nothing writes channel 0
            layer.self_attn.o_proj.weight[0].zero_()
            layer.mlp.down_proj.weight[0].zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.normal_(0.0, 1.0)
        embed[:, 0] = 1.0
        head.normal_(0.0, 1.0 / SHAPE["hidden"] ** 0.5)
        head[:, 0] = 0.0
        head[eos, 0] = EOS_BOOST  # a steady boost: answers end within a few dozen tokens
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)  # no sampling defaults


def main(out_dir: str, spec_file: str) -> None:
    """Build the model into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = json.loads(Path(spec_file).read_text())
    n_vocab, eos = build_tokenizer(out, spec)
    build_model(out, n_vocab, eos)
    print(f"built {out} ({n_vocab} tokens, end of turn {eos})")


if __name__ == "__main__":
    main(*sys.argv[1:3])
