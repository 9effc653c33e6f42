#!/usr/bin/env python3
"""Trains the BPE vocabulary of examples/llama_bpe.yaml with the `tokenizers`
package (PyPI) on the corpus of examples/gpt_char.yaml (Debian's
fortunes-min: fortunes, literature, riddles), and prints what converts the
run's validation loss from nats per token to nats per byte.

    PYTHON examples/make_llama_bpe_tokenizer.py

writes examples/llama_bpe_tokenizer.json: byte-level BPE with Llama 3's
pre-tokenizer regex, 512 ids (the 256 bytes, 255 merges, <|end_of_text|>).

weft's text data with data.tokenizer concatenates the files as bytes,
encodes them (ids equal to this package's, tests/text) and keeps the last
val_fraction of the ids for validation. The script does the same and prints
that tail's ids and bytes: a validation loss of L nats per token is
L x ids / bytes nats per byte, the unit of the byte-level example.
"""
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
FORTUNES = ["/usr/share/games/fortunes/" + f for f in ("fortunes", "literature", "riddles")]
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 512
VAL_FRACTION = 0.1


def main():
    text = b"".join(open(p, "rb").read() for p in FORTUNES)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text.decode("utf-8", errors="replace")], trainer)
    out = os.path.join(HERE, "llama_bpe_tokenizer.json")
    tok.save(out)
    os.chmod(out, 0o644)

    ids = tok.encode(text.decode("utf-8"), add_special_tokens=False).ids
    n_val = int(len(ids) * VAL_FRACTION)
    val = ids[len(ids) - n_val:]
    val_bytes = len(tok.decode(val).encode("utf-8"))
    if tok.decode(ids).encode("utf-8") != text:
        raise SystemExit("FAIL: decode(encode(corpus)) is not the corpus")
    print(f"wrote {out}: {tok.get_vocab_size()} ids")
    print(f"corpus: {len(text)} bytes, {len(ids)} ids ({len(text) / len(ids):.3f} bytes/id)")
    print(f"validation tail: {n_val} ids, {val_bytes} bytes: nats/byte = "
          f"val_loss x {n_val / val_bytes:.5f}")


if __name__ == "__main__":
    main()
