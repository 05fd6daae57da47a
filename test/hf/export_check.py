"""Loads a directory sluice-run --save-hf wrote as a user would --
AutoTokenizer and AutoModelForCausalLM, nothing else -- and checks that the
tokenizer encodes a text to the ids sluice-tokenize gave it, that its
special tokens are the config's, and that the model generates.

Usage: export_check.py DIR TEXT IDS-FILE [--slow]

--slow: AutoTokenizer.from_pretrained(DIR, use_fast=False), the
SentencePiece library itself (transformers' fast Llama tokenizer,
converted from a SentencePiece model, does not apply its nmt_nfkc
whitespace normalization: newlines and tabs encode otherwise).
"""
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    directory, text_path, ids_path = sys.argv[1:4]
    slow = "--slow" in sys.argv[4:]
    tokenizer = AutoTokenizer.from_pretrained(directory, use_fast=not slow)
    model = AutoModelForCausalLM.from_pretrained(directory)
    text = open(text_path, encoding="utf-8").read()
    want = [int(t) for t in open(ids_path).read().split()]
    got = tokenizer(text, add_special_tokens=False).input_ids
    assert got == want, "ids differ: %s vs %s" % (got[:20], want[:20])
    config = model.config
    assert tokenizer.bos_token_id == config.bos_token_id, (
        tokenizer.bos_token_id, config.bos_token_id)
    assert tokenizer.eos_token_id == config.eos_token_id, (
        tokenizer.eos_token_id, config.eos_token_id)
    prompt = tokenizer(text[:20], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=5, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
    assert out.shape[1] == prompt.input_ids.shape[1] + 5
    print("loaded %s: %s, %d ids equal, bos %s eos %s, generated 5 tokens"
          % (directory.rstrip("/").split("/")[-1], type(tokenizer).__name__,
             len(got), config.bos_token_id, config.eos_token_id))


if __name__ == "__main__":
    main()
