"""Checks sluice-run --generate's greedy tokens against transformers':
the directory sluice-run --save-hf wrote, loaded with AutoModelForCausalLM,
continues the same prompt ids with the same tokens.

Usage: generate_check.py DIR PROMPT-IDS GENERATED-FILE

PROMPT-IDS: comma-separated; GENERATED-FILE holds sluice-run's line
"generated N tokens: ID ...".
"""
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    directory, prompt, generated = sys.argv[1:4]
    prompt_ids = [int(t) for t in prompt.split(",")]
    line = [l for l in open(generated) if l.startswith("generated ")][0]
    want = [int(t) for t in line.split(":", 1)[1].split()]
    model = AutoModelForCausalLM.from_pretrained(directory)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), do_sample=False,
                             max_new_tokens=len(want),
                             min_new_tokens=len(want), pad_token_id=0)
    got = out[0, len(prompt_ids):].tolist()
    assert got == want, "transformers %s, sluice-run %s" % (got, want)
    print("greedy continuation of %d tokens equal: %s"
          % (len(want), " ".join(map(str, want))))


if __name__ == "__main__":
    main()
