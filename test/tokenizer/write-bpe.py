"""Writes a byte-level BPE tokenizer.json for byte-bpe.test with the
standard library: one token per byte symbol a..e, the space (GPT-2's
byte symbol U+0120) and the merges given, an added token <sep> (its id
the next after the vocabulary, as the tokenizers library numbers it, or
the one given), and the pre-tokenizer given. With --all-bytes every other
byte's symbol follows the merged tokens, so that any text has a token.

    write-bpe.py OUT PRETOKENIZER(json) [--merge A,B ...] [--merge-only A,B]
                 [--sep-strip]
                 [--id TOKEN=ID] [--sep-id ID] [--all-bytes]
"""
import json
import sys

out, pre = sys.argv[1], json.loads(sys.argv[2])
args = sys.argv[3:]
vocab = {c: i for i, c in enumerate(["a", "b", "c", "d", "e", "\u0120"])}
merges, strip, ids, sep_id, all_bytes = [], False, {}, None, False
while args:
    flag = args.pop(0)
    if flag in ("--merge", "--merge-only"):
        a, b = args.pop(0).split(",")
        a, b = a.replace("_", "\u0120"), b.replace("_", "\u0120")
        merges.append(a + " " + b)
        if flag == "--merge":  # --merge-only leaves the join out
            vocab.setdefault(a + b, len(vocab))
    elif flag == "--sep-strip":
        strip = True
    elif flag == "--all-bytes":
        all_bytes = True
    elif flag == "--sep-id":
        sep_id = int(args.pop(0))
    elif flag == "--id":
        token, value = args.pop(0).split("=")
        ids[token] = int(value)
vocab.update(ids)
if all_bytes:
    # GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
    # others for 256, 257, ... in order.
    printable = [b for b in range(256) if 33 <= b <= 126 or
                 161 <= b <= 172 or 174 <= b <= 255]
    extra = 0
    for b in range(256):
        symbol = chr(b) if b in printable else chr(256 + extra)
        extra += b not in printable
        vocab.setdefault(symbol, len(vocab))
sep = {"id": sep_id if sep_id is not None else len(vocab), "content": "<sep>", "single_word": False,
       "lstrip": strip, "rstrip": strip, "normalized": False,
       "special": True}
json.dump({"version": "1.0", "added_tokens": [sep], "normalizer": None,
           "pre_tokenizer": pre, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
          open(out, "w"), ensure_ascii=False)
