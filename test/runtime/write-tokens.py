"""Writes a token dataset as sluice-tokenize does (docs/data.md) from
tokens given on the command line, with header fields overridden, for
data-errors.test:

    write-tokens.py OUT TOKENS(comma-separated) [FIELD=VALUE ...]

FIELD is a header key (version, vocab, tokens, documents, dtype,
tokenizer_eos, ...; its value as JSON: 1.5, -1, null) or header_length
(the 8-byte length before the header)."""
import json
import struct
import sys

out, tokens = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
header = {"format": "sluice-tokens", "version": 1, "dtype": "uint16",
          "vocab": 256, "tokenizer": "bytes", "tokens": len(tokens),
          "documents": 1}
length_override = None
for field in sys.argv[3:]:
    key, value = field.split("=", 1)
    if key == "header_length":
        length_override = int(value)
    else:
        header[key] = value if key == "dtype" else json.loads(value)
text = json.dumps(header).encode()
body = b"SLUICETK" + struct.pack("<Q", length_override or len(text)) + text
body += bytes((-len(body)) % 8)
body += struct.pack("<2Q", 0, len(tokens))
body += struct.pack("<%dH" % len(tokens), *tokens)
open(out, "wb").write(body)
