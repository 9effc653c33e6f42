#!/usr/bin/env python3
"""The `tokenizers` side of bench/tokenize/run.

hf_tokenize.py --make-text DOCS OUT   writes the test text of DOCS documents
hf_tokenize.py TOKENIZER.json TEXT    encodes TEXT on one thread, prints MB/s
"""
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizer"))


def main():
    if sys.argv[1] == "--make-text":
        import make_tokenizer
        make_tokenizer.N_DOCS = int(sys.argv[2])
        with open(sys.argv[3], "w", encoding="utf-8", newline="") as f:
            f.write("".join(make_tokenizer.corpus()))
        return
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(sys.argv[1])
    text = open(sys.argv[2], encoding="utf-8", newline="").read()
    docs, start = [], 0
    while start < len(text):
        end = text.find("\n", start + 4000)
        end = len(text) if end < 0 else end + 1
        docs.append(text[start:end])
        start = end
    n = len(text.encode())
    t0, c0 = time.perf_counter(), time.process_time()
    encs = tok.encode_batch(docs, add_special_tokens=False)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print("tokenizers %s: %d tokens, %.1f MB in %.2f s, %.2f MB/s on 1 thread; "
          "%.2f s CPU, %.2f MB per CPU second"
          % (os.path.basename(sys.argv[1]), sum(len(e.ids) for e in encs), n / 1e6, dt,
             n / dt / 1e6, cpu, n / cpu / 1e6))


if __name__ == "__main__":
    main()
