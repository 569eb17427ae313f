#!/usr/bin/env python3
"""Writes N mutants of a fuzz corpus (bit flips, cuts, inserted random bytes and dictionary
words, splices with other inputs, repeated runs), for replaying through a gcc-built fuzz_<target>
where libFuzzer is not built: scripts/mutate_corpus.py CORPUS_DIR OUT_DIR N SEED [DICT]."""
import os, random, sys
src, out, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
random.seed(seed)
files = [open(os.path.join(src, f), 'rb').read() for f in sorted(os.listdir(src))]
dict_tokens = []
if len(sys.argv) > 5 and os.path.exists(sys.argv[5]):
    for line in open(sys.argv[5], encoding='latin-1'):
        line = line.strip()
        if line.startswith('"') and line.endswith('"'):
            dict_tokens.append(line[1:-1].encode('latin-1').decode('unicode_escape').encode('latin-1'))
os.makedirs(out, exist_ok=True)
for i in range(n):
    b = bytearray(random.choice(files))
    for _ in range(random.randint(1, 6)):
        op = random.randrange(7)
        p = random.randrange(len(b) + 1)
        if op == 0 and b: b[min(p, len(b)-1)] ^= 1 << random.randrange(8)
        elif op == 1: del b[p:p + random.randint(1, 64)]
        elif op == 2: b[p:p] = bytes(random.randrange(256) for _ in range(random.randint(1, 16)))
        elif op == 3 and dict_tokens: b[p:p] = random.choice(dict_tokens)
        elif op == 4: b = b[:p]
        elif op == 5:
            o = random.choice(files); q = random.randrange(len(o) + 1); b = b[:p] + o[q:]
        elif op == 6 and b:
            q = random.randrange(len(b)); b[q:q] = b[q:q + random.randint(1, 200)] * random.randint(1, 50)
    open(os.path.join(out, '%05d' % i), 'wb').write(bytes(b))
