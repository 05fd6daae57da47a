"""Makes small tokenizers with the reference Python libraries and writes
what they encode a text to, for tokenizers.test to compare with
sluice-tokenize --print.

  python tokenizer_reference.py WORKDIR

writes WORKDIR/text.txt (the text) and, for each tokenizer,
WORKDIR/NAME/ (its files) and WORKDIR/NAME.ids (its ids, one line):
  spm-bpe      SentencePiece BPE with byte fallback (Llama's kind)
  spm-unigram  SentencePiece unigram (Gemma's kind)
  gpt2         byte-level BPE, tokenizer.json and vocab.json + merges.txt
  llama3       byte-level BPE behind Llama 3's Split regex
"""

import os
import sys

import sentencepiece
import tokenizers
from tokenizers import Regex, decoders, models, pre_tokenizers, trainers

CORPUS = """\
Four score and seven years ago our fathers brought forth on this continent,
a new nation, conceived in Liberty, and dedicated to the proposition that all
men are created equal. Now we are engaged in a great civil war, testing
whether that nation, or any nation so conceived and so dedicated, can long
endure. We are met on a great battle-field of that war. We have come to
dedicate a portion of that field, as a final resting place for those who here
gave their lives that that nation might live. It is altogether fitting and
proper that we should do this. When in the Course of human events, it becomes
necessary for one people to dissolve the political bands which have connected
them with another, and to assume among the powers of the earth, the separate
and equal station to which the Laws of Nature and of Nature's God entitle
them, a decent respect to the opinions of mankind requires that they should
declare the causes which impel them to the separation. 1776, 1863; 42 -- 3.14!
"""

# Unseen words, digits, contractions, runs of spaces and newlines, tabs,
# accents, CJK and an emoji (bytes the vocabularies never saw).
TEXT = """\
We hold these truths to be self-evident, that they're endowed with rights;
  it's   2024 and 12345 tokens\tlater   -- na\u00efve caf\u00e9, \u6771\u4eac \U0001F600!

Governments are instituted among Men, deriving their just powers.
"""

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def write_ids(work, name, ids):
    with open(os.path.join(work, name + ".ids"), "w") as f:
        f.write(" ".join(str(i) for i in ids) + "\n")


def main():
    work = sys.argv[1]
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(CORPUS * 3)
    with open(os.path.join(work, "text.txt"), "w") as f:
        f.write(TEXT)

    for kind, extra in [("bpe", {"byte_fallback": True}), ("unigram", {})]:
        name = "spm-" + kind
        os.makedirs(os.path.join(work, name), exist_ok=True)
        sentencepiece.SentencePieceTrainer.train(
            input=corpus, model_prefix=os.path.join(work, name, "tokenizer"),
            vocab_size=400 if kind == "bpe" else 150, model_type=kind,
            character_coverage=1.0, minloglevel=2, **extra)
        sp = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(work, name, "tokenizer.model"))
        write_ids(work, name, sp.encode(TEXT))
        if kind == "bpe":
            # With the document markers sluice-tokenize adds by default.
            write_ids(work, name + "-marked",
                      [sp.bos_id()] + sp.encode(TEXT) + [sp.eos_id()])

    gpt2 = tokenizers.ByteLevelBPETokenizer()
    gpt2.train_from_iterator([CORPUS], vocab_size=400,
                             special_tokens=["<|endoftext|>"])
    os.makedirs(os.path.join(work, "gpt2"), exist_ok=True)
    gpt2.save(os.path.join(work, "gpt2", "tokenizer.json"))
    os.makedirs(os.path.join(work, "gpt2-files"), exist_ok=True)
    gpt2.save_model(os.path.join(work, "gpt2-files"))
    write_ids(work, "gpt2", gpt2.encode(TEXT).ids)
    # An added token inside the text is cut out whole.
    write_ids(work, "gpt2-special",
              gpt2.encode("one<|endoftext|>two").ids)

    llama3 = tokenizers.Tokenizer(models.BPE(ignore_merges=True))
    llama3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    llama3.decoder = decoders.ByteLevel()
    llama3.train_from_iterator([CORPUS], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    os.makedirs(os.path.join(work, "llama3"), exist_ok=True)
    llama3.save(os.path.join(work, "llama3", "tokenizer.json"))
    write_ids(work, "llama3", llama3.encode(TEXT, add_special_tokens=False).ids)
    print("made 4 tokenizers in", work)


if __name__ == "__main__":
    main()
