"""Writes a byte-level BPE tokenizer.json for byte-bpe.test with the
standard library: one token per byte symbol a..e, the space (GPT-2's
byte symbol U+0120) and the merges given, an added token <sep>, and the
pre-tokenizer given.

    write-bpe.py OUT PRETOKENIZER(json) [--merge A,B ...] [--sep-strip]
                 [--id TOKEN=ID]
"""
import json
import sys

out, pre = sys.argv[1], json.loads(sys.argv[2])
args = sys.argv[3:]
vocab = {c: i for i, c in enumerate(["a", "b", "c", "d", "e", "\u0120"])}
merges, strip, ids = [], False, {}
while args:
    flag = args.pop(0)
    if flag == "--merge":
        a, b = args.pop(0).split(",")
        a, b = a.replace("_", "\u0120"), b.replace("_", "\u0120")
        merges.append(a + " " + b)
        vocab.setdefault(a + b, len(vocab))
    elif flag == "--sep-strip":
        strip = True
    elif flag == "--id":
        token, value = args.pop(0).split("=")
        ids[token] = int(value)
vocab.update(ids)
sep = {"id": 100, "content": "<sep>", "single_word": False,
       "lstrip": strip, "rstrip": strip, "normalized": False,
       "special": True}
json.dump({"version": "1.0", "added_tokens": [sep], "normalizer": None,
           "pre_tokenizer": pre, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
          open(out, "w"), ensure_ascii=False)
