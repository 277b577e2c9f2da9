"""The per-token and per-text numbers the contextualization claims are decided on, from the held-out losses of
the trained decoder and its three controls.

Per scored token (rows aligned with the probe's index of (sample, position, cls)):

* ``context_loss`` C_i (the decoder that reads every layer's states), ``context_loss_blind`` (a decoder trained
  on zeros: the prior over prefixes), ``context_loss_layer0`` (a decoder trained on layer 0 alone, the token's
  embedding: the prior plus what the token's identity predicts about its neighbours) and
  ``context_loss_shuffled`` (the trained decoder fed another token's states);
* ``context_added_pos_centred``: C_layer0 − C, the nats per prefix token that the contextual states add beyond
  the token's identity, minus its mean over the scored tokens at the same position, so that word classes are
  compared at matched positions (the class claim);
* ``context_loss_pos_centred``, ``context_loss_blind_pos_centred``, ``context_loss_layer0_pos_centred`` and
  ``token_error_pos_centred``: the same losses and E_i, each minus its mean at the token's position (the
  correlation claim: E_i rises with position, and a shared trend with position is not a relation between
  tokens).

Per scored text: ``decoder_gain_vs_blind``, ``decoder_gain_vs_shuffled``, ``decoder_gain_vs_layer0`` (the mean
control loss − the mean trained loss over the text's tokens; the gates' unit is the text).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CONTROLS = ("blind", "shuffled", "layer0")
CENTRED = ("context_loss", "context_loss_blind", "context_loss_layer0")
FUNCTION, CONTENT = ("determiner", "preposition", "punctuation"), ("noun", "verb", "adjective")


def centred_by_position(positions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each value minus the mean of the values at the same position."""
    v = pd.Series(np.asarray(values, float))
    return (v - v.groupby(np.asarray(positions)).transform("mean")).to_numpy()


def control_rows(index: pd.DataFrame, loss: dict[str, np.ndarray], errors: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-token rows of the losses in `loss` (aligned with `index`), their position-centred versions and
    ``context_added_pos_centred`` when the layer-0 control is there, E_i centred over the same tokens when
    `errors` (rows of ``token_error_mean`` with sample and position) is given, and, per text, the gain over each
    control present: mean control loss − mean trained loss over the text's tokens."""
    index = index.reset_index(drop=True)
    pos = index["position"].to_numpy()
    per_token = {m: np.asarray(v, float) for m, v in loss.items()}
    for m in CENTRED:
        if m in per_token:
            per_token[f"{m}_pos_centred"] = centred_by_position(pos, per_token[m])
    if "context_loss_layer0" in per_token:
        per_token["context_added_pos_centred"] = centred_by_position(
            pos, per_token["context_loss_layer0"] - per_token["context_loss"])
    frame = pd.concat([index.assign(metric=m, value=v) for m, v in per_token.items()], ignore_index=True)
    parts = [frame]
    if errors is not None:
        e = index.merge(errors[["sample", "position", "value"]], on=["sample", "position"], how="inner")
        parts.append(e.assign(metric="token_error_pos_centred",
                              value=centred_by_position(e["position"].to_numpy(), e["value"].to_numpy())))
    per_text = pd.DataFrame({m: index.assign(v=np.asarray(v, float)).groupby("sample")["v"].mean()
                             for m, v in loss.items()})
    parts += [pd.DataFrame({"sample": per_text.index, "metric": f"decoder_gain_vs_{c}",
                            "value": (per_text[f"context_loss_{c}"] - per_text["context_loss"]).to_numpy()})
              for c in CONTROLS if f"context_loss_{c}" in per_text]
    return pd.concat(parts, ignore_index=True)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1]) if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")


def _partial(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    rxy, rxz, ryz = _pearson(x, y), _pearson(x, z), _pearson(y, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        return float((rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2)))


def summary(frame: pd.DataFrame) -> list[str]:
    """Descriptive lines for the report: C and its controls per word-class group, and the correlations of C with
    E — the paper's plain r(C, E) (Table 2's estimand), and the position-centred partial ones that the
    correlation claim is decided on (their intervals come from the rule)."""
    tok = frame[frame["sample"].notna() & frame["position"].notna()]
    wide = tok.pivot_table(index=["sample", "position"], columns="metric", values="value", aggfunc="first")
    cls = tok.drop_duplicates(["sample", "position"]).set_index(["sample", "position"])["cls"]
    wide = wide.join(cls)
    need = {"context_loss", "context_loss_blind", "context_loss_layer0", "token_error_mean"}
    if not need <= set(wide.columns):
        return []
    lines = []
    scored = wide.dropna(subset=["context_loss"])  # E_i also covers tokens too early to have a full prefix
    groups = {"function": scored["cls"].isin(FUNCTION), "content": scored["cls"].isin(CONTENT)}
    desc = []
    for name, m in groups.items():
        g = scored[m]
        if len(g):
            desc.append(f"{name} words ({len(g)} tokens): C {g['context_loss'].mean():.3f}, C_blind "
                        f"{g['context_loss_blind'].mean():.3f}, C_layer0 {g['context_loss_layer0'].mean():.3f}, "
                        f"C_blind − C {(g['context_loss_blind'] - g['context_loss']).mean():+.3f}, C_layer0 − C "
                        f"{(g['context_loss_layer0'] - g['context_loss']).mean():+.3f}")
    if desc:
        lines.append("mean held-out loss per word-class group (nats per prefix token; raw C is the paper's "
                     "Fig. 4 quantity, C_layer0 − C what the contextual states add beyond the token's identity): "
                     + "; ".join(desc))
    both = wide.dropna(subset=list(need))
    if len(both) > 2:
        c, e = both["context_loss"].to_numpy(), both["token_error_mean"].to_numpy()
        pos = np.asarray(both.index.get_level_values("position"), float)
        cc, ec = centred_by_position(pos, c), centred_by_position(pos, e)
        bc = centred_by_position(pos, both["context_loss_blind"].to_numpy())
        lc = centred_by_position(pos, both["context_loss_layer0"].to_numpy())
        lines.append(f"correlations over {len(both)} scored tokens: plain Pearson r(C, E) = {_pearson(c, e):.3f} "
                     f"(the paper's estimand, the one Table 2 reports); r(E, position) = {_pearson(e, pos):.3f}, "
                     f"r(C, position) = {_pearson(c, pos):.3f}; with C, E and the controls centred per position: "
                     f"r = {_pearson(cc, ec):.3f}, partial r given C_blind = {_partial(cc, ec, bc):.3f}, partial r "
                     f"given C_layer0 = {_partial(cc, ec, lc):.3f} (the correlation claim's decision)")
    return lines
