"""Cost of recording activation statistics, measured in one run.

    python benchmarks/activation_stats.py [--model gemma3-270m] [--tokens 1024] [--threads 2]

Prints, for the same batches of real multilingual text:
* forward with statistics recording ÷ bare forward through the blocks (target ≤ 1.15×);
* peak extra memory while recording N and 4N tokens (each in a fresh process; target 4N ÷ N ≤ 1.2×);
* tokens per second: bare blocks, blocks with recording, and bits per byte with the LM head.
Peak memory is the anonymous resident set size (file-backed weight pages excluded), sampled every 2 ms,
above its level just before the pass.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _rss() -> int:
    """Anonymous resident memory (resident − file-backed pages): the model's weights are memory-mapped, and the
    pages of embedding rows that new tokens touch would otherwise count as memory the pass allocated."""
    with open("/proc/self/statm") as fh:
        fields = fh.read().split()
    return (int(fields[1]) - int(fields[2])) * 4096


class PeakRss:
    def __enter__(self):
        self.base = self.peak = _rss()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _watch(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.extra = self.peak - self.base


def _setup(model_name: str, tokens: int, threads: int):
    import torch

    from bench import models
    from bench.corpora import parallel
    from bench.families.langneurons import text as tx

    torch.set_num_threads(threads)
    m = models.load(models.resolve(model_name))
    par = parallel.load_parallel("gettext:en,de,fr,es,ru,ja,zh_CN")
    texts = [t for u in par.texts[:2000] for t in u]
    docs = tx.documents(m.tokenizer, texts, doc_tokens=128, budget=tokens)
    return m, docs


def memory_child(model_name: str, tokens: int, threads: int) -> None:
    from bench.families.langneurons import stats

    m, docs = _setup(model_name, tokens, threads)
    with PeakRss() as peak:
        got = stats.record(m, docs, top_frac=0.05, max_tokens=1024)
    print(json.dumps({"tokens": got.n_tokens, "extra_bytes": peak.extra, "peak_bytes": peak.peak}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.model, args.tokens, args.threads)
        return
    import torch

    from bench.families.langneurons import edit, stats
    from bench.families.langneurons import text as tx

    m, docs = _setup(args.model, args.tokens, args.threads)
    n_tok = sum(len(d) for d in docs)
    batches = list(tx.batches(docs, max_tokens=1024, pad=tx.pad_id(m.tokenizer)))

    def bare():
        with torch.no_grad():
            for b in batches:
                m.hf.base_model(input_ids=b.ids, attention_mask=b.mask, use_cache=False)

    def recorded():
        stats.record(m, docs, top_frac=0.05, max_tokens=1024)

    bare()  # warm-up
    t_bare, t_rec = [], []
    for _ in range(args.repeats):  # interleaved, best of each: the machine is shared
        t = time.perf_counter(); bare(); t_bare.append(time.perf_counter() - t)
        t = time.perf_counter(); recorded(); t_rec.append(time.perf_counter() - t)
    texts = [tx_ for tx_ in (m.tokenizer.decode(d[1:]) for d in docs[:4])]
    t = time.perf_counter()
    edit.text_bits(m, texts)
    t_head = time.perf_counter() - t
    head_tokens = sum(len(tx.encode(m.tokenizer, s)) for s in texts)

    mem = {}
    for n in (args.tokens, 4 * args.tokens):
        out = subprocess.run([sys.executable, __file__, "--memory-child", "--model", args.model, "--tokens", str(n),
                              "--threads", str(args.threads)], capture_output=True, text=True, check=True)
        mem[n] = json.loads(out.stdout.strip().splitlines()[-1])
    small, big = mem[args.tokens], mem[4 * args.tokens]
    print(f"model {args.model}, {args.threads} threads, {n_tok} tokens in {len(batches)} batches")
    print(f"bare forward (blocks)      {n_tok / min(t_bare):8.1f} tokens/s")
    print(f"forward with recording     {n_tok / min(t_rec):8.1f} tokens/s")
    print(f"bits per byte (with head)  {head_tokens / t_head:8.1f} tokens/s")
    print(f"recording / bare time      {min(t_rec) / min(t_bare):8.3f}×   (target ≤ 1.15×)")
    for label, r in (("N", small), ("4N", big)):
        print(f"peak memory {label:>2} ({r['tokens']:>5} tokens): {r['peak_bytes'] / 2**20:8.1f} MiB in all, "
              f"{r['extra_bytes'] / 2**20:6.1f} MiB above the level before the pass")
    print(f"peak memory 4N / N         {big['peak_bytes'] / small['peak_bytes']:8.3f}×   (target ≤ 1.2×); "
          f"the part above the pre-pass level: {big['extra_bytes'] / max(1, small['extra_bytes']):.2f}×")


if __name__ == "__main__":
    main()
