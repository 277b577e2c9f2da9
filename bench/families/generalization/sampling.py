"""Batched decoding with a KV cache (greedy or seeded sampling) and per-sequence log-probabilities.

Prompts are left-padded so every sequence's next token sits in the last column; position ids follow the
attention mask, so padding changes nothing.  Decoding stops at the first newline (an answer is one line) or
the end-of-sequence token, per sequence; the tokens kept are those up to and including the stopping one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Completions:
    prompt_ids: torch.Tensor   # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    ids: torch.Tensor          # (B, C) right-padded with the pad id
    mask: torch.Tensor         # (B, C) 1 on kept tokens
    texts: tuple[str, ...]


def pad_id(tok) -> int:
    for cand in (tok.pad_token_id, tok.eos_token_id, 0):
        if cand is not None:
            return int(cand)
    return 0


def encode_prompts(tok, prompts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (B, P) ids and mask."""
    rows = [tok(p, add_special_tokens=True)["input_ids"] for p in prompts]
    width = max(len(r) for r in rows)
    pid = pad_id(tok)
    ids = torch.full((len(rows), width), pid, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = 1
    return ids.to(device), mask.to(device)


def encode_completions(tok, texts: list[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (B, C) ids and mask of completion texts (no special tokens)."""
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), pad_id(tok), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids.to(device), mask.to(device)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def decode(model, tok, prompts: list[str], max_new_tokens: int, *, generator: torch.Generator | None = None,
           temperature: float = 1.0, micro_batch: int = 32) -> Completions:
    """Greedy decoding when `generator` is None, else sampling at `temperature` drawn from `generator`."""
    device = next(model.parameters()).device
    outs = [_decode_batch(model, tok, prompts[i:i + micro_batch], max_new_tokens, generator, temperature, device)
            for i in range(0, len(prompts), micro_batch)]
    P = max(o.prompt_ids.shape[1] for o in outs)
    C = max(o.ids.shape[1] for o in outs)
    pid = pad_id(tok)

    def left(t, w, fill):  # (b, p) -> (b, w), padded on the left
        return torch.cat([torch.full((t.shape[0], w - t.shape[1]), fill, dtype=t.dtype, device=t.device), t], 1)

    def right(t, w, fill):
        return torch.cat([t, torch.full((t.shape[0], w - t.shape[1]), fill, dtype=t.dtype, device=t.device)], 1)

    return Completions(torch.cat([left(o.prompt_ids, P, pid) for o in outs]),
                       torch.cat([left(o.prompt_mask, P, 0) for o in outs]),
                       torch.cat([right(o.ids, C, pid) for o in outs]),
                       torch.cat([right(o.mask, C, 0) for o in outs]),
                       tuple(t for o in outs for t in o.texts))


def _decode_batch(model, tok, prompts, max_new_tokens, generator, temperature, device) -> Completions:
    ids, mask = encode_prompts(tok, prompts, device)  # (B, P)
    B = ids.shape[0]
    eos = tok.eos_token_id
    out = torch.full((B, max_new_tokens), pad_id(tok), dtype=torch.long, device=device)
    keep = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    texts = [""] * B
    cur_ids, cur_mask, past = ids, mask, None
    for t in range(max_new_tokens):
        pos = _positions(cur_mask)[:, -cur_ids.shape[1]:]
        res = model(input_ids=cur_ids, attention_mask=cur_mask, position_ids=pos,
                    cache=past, use_cache=True, logits_to_keep=1)
        past = res.cache
        logits = res.logits[:, -1, :].float()  # (B, V)
        if generator is None:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(device)
        out[:, t] = torch.where(done, out[:, t], nxt)
        keep[:, t] = (~done).long()
        for i in range(B):
            if not done[i]:
                texts[i] = tok.decode(out[i, : t + 1][keep[i, : t + 1].bool()], skip_special_tokens=True)
                if "\n" in texts[i] or (eos is not None and int(nxt[i]) == eos):
                    done[i] = True
        if bool(done.all()):
            out, keep = out[:, : t + 1], keep[:, : t + 1]
            break
        cur_ids = nxt[:, None]
        cur_mask = torch.cat([cur_mask, torch.ones((B, 1), dtype=cur_mask.dtype, device=device)], 1)
    return Completions(ids, mask, out, keep, tuple(x.split("\n", 1)[0] for x in texts))


def token_logprobs(model, prompt_ids, prompt_mask, ids, mask) -> torch.Tensor:
    """(B, C) log-probabilities of the completion tokens `ids` after their prompts (0 where `mask` is 0).

    One forward over prompt + completion; only the logits that predict completion tokens are computed
    (``logits_to_keep``), which spares most of the LM head on long prompts.
    """
    full_ids = torch.cat([prompt_ids, ids], 1)  # (B, P + C)
    full_mask = torch.cat([prompt_mask, mask], 1)
    C = ids.shape[1]
    res = model(input_ids=full_ids, attention_mask=full_mask, position_ids=_positions(full_mask),
                use_cache=False, logits_to_keep=C + 1)
    logits = res.logits[:, :-1, :].float()  # (B, C, V): position P-1+t predicts completion token t
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)  # (B, C)
    return logp * mask
