#!/usr/bin/env python3
"""Write a tiny Llama model with random weights, in Hugging Face format, for vLLM's CPU build.

Nothing comes from a model hub. The tokenizer is a byte-level BPE trained here, in a few
seconds, on the Python reference manual that ships with the interpreter (``pydoc_data``);
its chat template is ChatML and its end-of-sequence token ``<|im_end|>``. The weights are
random (seeded), so the text is gibberish, but everything a load test measures is vLLM's own
work: tokenising, chat templating, scheduling, prefill, the paged KV cache, decoding,
sampling, detokenising, streaming. Requests need ``"ignore_eos": true`` (surgelab's default,
``target.force_output_tokens``) for exact output lengths, since random weights may pick EOS.

Run with the vLLM venv's Python (it has torch, transformers and tokenizers):

    build_model.py OUT_DIR [--layers 4 --hidden 256 --ffn 512 --heads 4 --vocab 8192 --ctx 4096]
"""

from __future__ import annotations

import argparse
import json
import os

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def training_text():
    """Paragraphs of English prose from the Python reference manual (stdlib, always present)."""
    import pydoc_data.topics

    for key in sorted(pydoc_data.topics.topics):
        for paragraph in pydoc_data.topics.topics[key].split("\n\n"):
            if paragraph.strip():
                yield paragraph


def train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text(), trainer)
    return tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--ctx", type=int, default=4096, help="max_position_embeddings")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    os.makedirs(args.out, exist_ok=True)
    raw = os.path.join(args.out, "bpe.json")
    train_tokenizer(args.vocab).save(raw)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=raw,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    os.remove(raw)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = args.ctx

    torch.manual_seed(args.seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=args.ctx,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": args.out, "parameters": params, "vocab": len(tokenizer), "layers": args.layers}))


if __name__ == "__main__":
    main()
