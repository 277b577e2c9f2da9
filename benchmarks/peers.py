"""bench's capture vs TransformerLens `run_with_cache` vs nnsight `trace`, on the same model and tokens.

Captures every layer's residual stream (block outputs) and MLP activations (the (T, d_ffn) input of the down
projection) for N tokens, at two sizes of N, and prints wall time (median of 3 after a warm-up pass) and peak
memory above the loaded model (the process's resident-set high-water mark, reset just before capturing), then
the ratios bench ÷ fastest peer (time) and bench ÷ TransformerLens (memory), all measured in this run.  Each
tool × N runs in a fresh process; all load the same transformers model (float32, CPU by default); the peers
are checked to capture the same numbers as bench.  The peers are benchmark-only (requirements-peers.txt).

bench captures as its probes do: through the model's body (``hf.base_model``), since no logits are asked for;
the peers run the whole model, as ``run_with_cache`` and ``trace`` do by default.  The head is a fifth of
SmolLM2-135M's compute and two thirds of Gemma-3-270M's parameters, so that choice is most of the time ratio;
the memory ratio has a floor: all three must end holding the captured float32 tensors (N × L × (d + d_ffn) × 4
bytes, 129 MB for SmolLM2 at N = 512).

    PYTHON_PEERS=/tmp/peers-venv/bin/python python benchmarks/peers.py [--model smollm2-135m] [--n 256 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("bench", "transformer_lens", "nnsight")


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: resets VmHWM to the current resident set


def child(tool: str, model: str, n: int, device: str) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from bench import models
    from bench.models import arch, hooks

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    loaded = models.load(models.resolve(model), device)
    hf, a = loaded.hf, arch.inspect(loaded.hf)
    ids = torch.randint(0, hf.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(0)).to(device)
    L = len(a.blocks)

    if tool == "bench":
        def capture():
            with torch.no_grad(), hooks.capture(hf, [b.path for b in a.blocks]) as resid, \
                    hooks.capture(hf, [b.ffn_out for b in a.blocks], inputs=True) as mlp:
                hf.base_model(input_ids=ids, use_cache=False)  # the blocks only: no logits are asked for
            return [resid[b.path][0] for b in a.blocks] + [mlp[b.ffn_out][0] for b in a.blocks]
    elif tool == "transformer_lens":
        from transformer_lens import TransformerBridge

        bridge = TransformerBridge.boot_transformers(loaded.ref.location, hf_model=hf,
                                                     tokenizer=loaded.tokenizer, device=device)
        names = [f"blocks.{i}.hook_resid_post" for i in range(L)] + [f"blocks.{i}.mlp.hook_post" for i in range(L)]
        wanted = set(names)

        def capture():
            with torch.no_grad():
                _, cache = bridge.run_with_cache(ids, names_filter=lambda name: name in wanted)
            return [cache[k] for k in names]
    elif tool == "nnsight":
        import nnsight

        lm = nnsight.LanguageModel(hf, tokenizer=loaded.tokenizer)

        def capture():
            saved = []
            with torch.no_grad(), lm.trace(ids):
                for i in range(L):  # in execution order: the MLP's inner input comes before the block output
                    saved.append((_walk(lm, a.blocks[i].ffn_out).input.save(),
                                  _walk(lm, a.blocks[i].path).output.save()))
            return [_tensor(r) for _, r in saved] + [_tensor(m) for m, _ in saved]
    else:
        raise SystemExit(f"unknown tool {tool}")

    with torch.no_grad():  # touch every weight once (a checkpoint is memory-mapped: pages load on first use)
        hf(input_ids=ids[:, :8], use_cache=False)
    base = _rss_kb("VmRSS")  # the loaded model and the tool's set-up, before any capture
    _reset_peak()
    got = capture()  # warm-up (and the values checked against bench)
    assert len(got) == 2 * L, (tool, len(got))
    check = [got[L - 1].float().cpu(), got[2 * L - 1].float().cpu()]
    del got
    times = []
    for _ in range(3):
        t = time.perf_counter()
        got = capture()
        times.append(time.perf_counter() - t)
        del got
    peak = _rss_kb("VmHWM")
    if tool == "bench":
        torch.save(check, os.environ["PEERS_CHECK"])
        diff = 0.0
    else:
        ref = torch.load(os.environ["PEERS_CHECK"])
        diff = max((x.reshape(r.shape) - r).abs().max().item() / (r.abs().max().item() or 1.0)
                   for x, r in zip(check, ref))
    return {"tool": tool, "n": n, "seconds": statistics.median(times), "peak_mb": (peak - base) / 1024,
            "base_mb": base / 1024, "rel_diff_vs_bench": diff}


def _walk(root, path: str):
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def _tensor(x):
    x = getattr(x, "value", x)
    return x[0] if isinstance(x, (tuple, list)) else x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, nargs=2, default=[128, 512])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--child", nargs=2, metavar=("TOOL", "N"))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.model, int(args.child[1]), args.device)))
        return
    peers_py = os.environ.get("PYTHON_PEERS", sys.executable)
    sys.path.insert(0, str(ROOT))
    from bench import models

    ref = models.resolve(args.model)  # every tool loads the same checkpoint folder (a peer venv may lack the
    folder = models.prepare(ref) if ref.kind in ("alias", "gguf") else ref.location  # embedded packages)
    rows = {}
    for n in args.n:
        check = Path(os.environ.get("TMPDIR", "/tmp")) / f"peers-check-{os.getpid()}-{n}.pt"
        for tool in TOOLS:
            py = sys.executable if tool == "bench" else peers_py
            env = {**os.environ, "PEERS_CHECK": str(check), "PYTHONPATH": str(ROOT),
                   "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
            out = subprocess.run([py, __file__, "--model", folder, "--device", args.device,
                                  "--child", tool, str(n)], capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{tool} N={n}: failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else '?'}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows[(tool, n)] = r
            print(f"{tool:<17} N={n:<6} time {r['seconds']:8.3f} s   peak above model {r['peak_mb']:8.1f} MB"
                  f"   (model {r['base_mb']:.0f} MB)   max rel diff vs bench {r['rel_diff_vs_bench']:.1e}")
        check.unlink(missing_ok=True)
    print(f"\nratios ({args.model}, {args.device}, {os.cpu_count()} CPU cores visible, "
          f"{os.environ.get('BENCH_THREADS', '1')} torch thread):")
    for n in args.n:
        b = rows.get(("bench", n))
        peers = [rows[(t, n)] for t in TOOLS[1:] if (t, n) in rows]
        if not b or not peers:
            continue
        fastest = min(peers, key=lambda r: r["seconds"])
        line = f"  N={n}: time bench / fastest peer ({fastest['tool']}) = {b['seconds'] / fastest['seconds']:.2f}x"
        for r in peers:
            line += f"; time bench / {r['tool']} = {b['seconds'] / r['seconds']:.2f}x"
        tl = rows.get(("transformer_lens", n))
        if tl and tl["peak_mb"] > 0:
            line += f"; peak memory bench / transformer_lens = {b['peak_mb'] / tl['peak_mb']:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
