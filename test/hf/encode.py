"""Prints the ids the Hugging Face tokenizers library encodes a text file
to with a tokenizer.json (no special tokens added), one line, as
sluice-tokenize --no-markers --print does.

  python encode.py TOKENIZER_JSON TEXT_FILE
"""

import sys

import tokenizers

tokenizer = tokenizers.Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    text = f.read()
print(" ".join(str(i) for i in
               tokenizer.encode(text, add_special_tokens=False).ids))
