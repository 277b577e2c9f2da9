"""The peer libraries' side of the cross-checks, and how a test reaches it.

A test calls :func:`run` with a task name and plain inputs (numpy arrays, strings, numbers).  The task runs

* in this interpreter, when the peer library imports here (a venv that has both bench and the peers), or
* in the interpreter named by ``$PYTHON_PEERS``, as ``python _peer.py TASK IN.npz OUT.npz``: inputs and outputs
  travel as ``.npz`` files (a model as a saved checkpoint folder, named by its path), so that interpreter needs
  the peer, numpy, torch and transformers, but not bench;

and otherwise the test is skipped with the way to install the peers.  This module never imports bench, and at
module level nothing but numpy and the standard library: it is the script the peer interpreter runs.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

INSTALL = ("install the peers into a venv that sees bench's packages (benchmarks/requirements-peers.txt says how) "
           "and run pytest with it, or name its python in PYTHON_PEERS")

# Peers whose package cannot be imported as a whole, whose modules are loaded from their files (see _microscope).
LOADED_BY_FILE = ("llm_microscope",)

# Head types of TransformerLens' detector, in the order the scores are returned.
HEAD_TYPES = ("previous_token_head", "duplicate_token_head", "induction_head")


def skdim_twonn(discards: np.ndarray, **clouds: np.ndarray) -> dict[str, np.ndarray]:
    """scikit-dimension's TwoNN (the linear fit of Facco et al.) on each named point cloud (n, D), once per
    discard fraction: {name: (len(discards),) dimensions}."""
    import skdim

    out = {}
    for name, points in clouds.items():
        x = np.asarray(points, np.float64)
        out[name] = np.asarray([skdim.id.TwoNN(discard_fraction=float(f), method="linear").fit(x).dimension_
                                for f in np.atleast_1d(discards)], np.float64)
    return out


def tl_head_scores(model_dir: str, ids: np.ndarray) -> dict[str, np.ndarray]:
    """TransformerLens' head detector on each row of `ids` (N, T), for the checkpoint folder `model_dir`.

    The model is wrapped by a TransformerBridge from the folder (no hub), with HookedTransformer-equivalent
    processing (layer norms folded into the weights, writing weights centred), and without a BOS token: each row
    is given to the detector as the text of its tokens, which must tokenise back to the same ids (checked by the
    caller on the returned ``tokens``).  Returns ``tokens`` (N, T), ``scores`` (N, 3, layers, heads) for
    :data:`HEAD_TYPES` (error measure "mul", nothing excluded), the attention ``patterns`` (N, layers, heads, T, T)
    and the ``logprobs`` (N, T, vocab) the bridge computes.
    """
    import torch
    from transformer_lens import TransformerBridge
    from transformer_lens.head_detector import detect_head
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    bridge = TransformerBridge.boot_transformers(str(model_dir), hf_model=hf, tokenizer=tok, device="cpu")
    bridge.enable_compatibility_mode(disable_warnings=True)
    bridge.cfg.default_prepend_bos = False  # bench scores sequences without a BOS token
    tokens, scores, patterns, logprobs = [], [], [], []
    with torch.no_grad():
        for row in np.asarray(ids):
            text = " ".join(tok.convert_ids_to_tokens([int(i) for i in row]))
            tokens.append(bridge.to_tokens(text)[0].cpu().numpy())
            scores.append(np.stack([detect_head(bridge, text, name, error_measure="mul").cpu().numpy()
                                    for name in HEAD_TYPES]))
            logits, cache = bridge.run_with_cache(torch.as_tensor(row, dtype=torch.long)[None])
            patterns.append(np.stack([cache["pattern", layer][0].cpu().numpy()
                                      for layer in range(bridge.cfg.n_layers)]))
            logprobs.append(torch.log_softmax(logits[0].float(), dim=-1).cpu().numpy())
    return {"tokens": np.stack(tokens), "scores": np.stack(scores), "patterns": np.stack(patterns),
            "logprobs": np.stack(logprobs)}


def _microscope(name: str):
    """Module `name` (functions, logit_lens) of the llm-microscope package, loaded from its file.

    The package's ``__init__`` (0.0.7) imports ``logit_lens`` as a top-level module and fails, so importing
    ``llm_microscope`` raises; its two modules import nothing of each other and load fine on their own."""
    import importlib.util as iu

    found = iu.find_spec("llm_microscope")  # locates the package without running its __init__
    path = Path(list(found.submodule_search_locations)[0]) / f"{name}.py"
    spec = iu.spec_from_file_location(f"llm_microscope_{name}", path)
    module = iu.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def microscope_functions(**clouds: np.ndarray) -> dict[str, np.ndarray]:
    """llm-microscope's ``intrinsic_dimension`` and ``calculate_anisotropy_torch`` on each named cloud (n, D), and
    its ``procrustes_similarity`` of each cloud with the next one in the order given: {name: (3,) [ID,
    anisotropy, similarity to the next cloud or NaN]}."""
    import torch

    f = _microscope("functions")
    names = list(clouds)
    out = {}
    for i, name in enumerate(names):
        x = torch.from_numpy(np.asarray(clouds[name], np.float64))
        sim = (f.procrustes_similarity(x, torch.from_numpy(np.asarray(clouds[names[i + 1]], np.float64)))
               if i + 1 < len(names) else float("nan"))
        out[name] = np.array([f.intrinsic_dimension(x, "cpu"), f.calculate_anisotropy_torch(x), sim], np.float64)
    return out


def microscope_logit_lens(model_dir: str, text: str) -> dict[str, np.ndarray]:
    """llm-microscope's ``logit_lens`` on `text` for the checkpoint folder `model_dir`: ``losses`` (layers + 1,
    T − 1), ``predictions`` (layers + 1, T − 1) and the ``ids`` it tokenised (T,)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lens = _microscope("logit_lens")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    predictions, losses, _ = lens.logit_lens(model, tok, text)
    return {"losses": np.asarray(losses, np.float64), "predictions": predictions.cpu().numpy(),
            "ids": tok(text, return_tensors="pt")["input_ids"][0].numpy()}


TASKS = {"skdim_twonn": ("skdim", skdim_twonn), "tl_head_scores": ("transformer_lens", tl_head_scores),
         "microscope_functions": ("llm_microscope", microscope_functions),
         "microscope_logit_lens": ("llm_microscope", microscope_logit_lens)}


def _plain(value):
    """An input as it comes back from an .npz file: 0-d arrays become Python scalars and strings."""
    return value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value


@functools.lru_cache(maxsize=None)
def _where(module: str) -> str | None:
    """Where `module` imports: "here" (this interpreter), else the python $PYTHON_PEERS names, else None."""
    if importlib.util.find_spec(module) is not None:
        return "here"
    python = os.environ.get("PYTHON_PEERS")
    found = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    if python and subprocess.run([python, "-c", found], capture_output=True).returncode == 0:
        return python
    return None


def require(module: str) -> str:
    """Where `module` runs ("here" or a python path); skips the calling test when it is nowhere."""
    import pytest

    where = _where(module)
    if where is None:
        python = os.environ.get("PYTHON_PEERS")
        said = f"PYTHON_PEERS={python} cannot import it" if python else "PYTHON_PEERS is not set"
        pytest.skip(f"peer {module} is not installed here and {said}: {INSTALL}")
    if where == "here" and module not in LOADED_BY_FILE:
        pytest.importorskip(module)
    return where


def run(task: str, **inputs) -> dict[str, np.ndarray]:
    """Run `task` where its peer library is (see the module docstring); skip the calling test if nowhere."""
    import pytest

    module, fn = TASKS[task]
    python = require(module)
    if python == "here":
        return fn(**inputs)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp:
        src, dst = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(src, **{k: np.asarray(v) for k, v in inputs.items()})
        done = subprocess.run([python, __file__, task, str(src), str(dst)], capture_output=True, text=True,
                              env=env, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"{task} failed under PYTHON_PEERS={python}:\n{done.stderr[-4000:]}")
        with np.load(dst) as got:
            return {k: got[k] for k in got.files}


def main(argv: list[str]) -> None:
    task, src, dst = argv
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(1)
    with np.load(src) as given:
        inputs = {k: _plain(given[k]) for k in given.files}
    np.savez(dst, **TASKS[task][1](**inputs))


if __name__ == "__main__":
    main(sys.argv[1:])
