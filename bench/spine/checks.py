"""A loaded spec checked against the code: its probe and rule exist, every parameter fits their signatures and
every corpus it names resolves (source, variant, files), under the base spec and every profile it defines.

Loading (:mod:`bench.ground.spec`) needs nothing but the file; this check needs the registries filled and the
corpora, so it sits above them.
"""

from __future__ import annotations

import functools
from pathlib import Path

from bench import corpora
from bench.ground import registry
from bench.ground.errors import SpecError
from bench.ground.spec import Spec
from bench.ground.validate import find_line


def check_spec(spec: Spec) -> None:
    """Check probe and rule names and parameters under the base spec and every profile it defines."""
    probe = registry.probe(spec.probe, on_error=lambda m: SpecError(m, path=spec.path, key="measure.probe"))
    rule = registry.rule(spec.rule, on_error=lambda m: SpecError(m, path=spec.path, key="verdict.rule"))
    for profile in (None, *spec.profiles):
        s = spec.with_profile(profile)
        label = f" (profile '{profile}')" if profile else ""
        for name, value, problem in probe.check(s.probe_params()):
            section = "data" if name in spec.data else "measure"
            raise SpecError(problem + label, path=spec.path, key=f"{section}.{name}",
                            line=find_line(_text(spec.path), section, name))
        rule.check_all(s.rule_params(), spec)
        _check_requires(s, label)
        _check_corpora(s, label)
    if spec.control_decide:
        from bench.stats import control

        rule = spec.control_rule()[0]
        if not control.supports(rule):
            raise SpecError(f"rule '{rule}' cannot be decided against its control (rules that can: "
                            f"{', '.join(sorted(control.ARMS))})", path=spec.path, key="control.decide",
                            line=find_line(_text(spec.path), "control", "decide"))


def _check_requires(spec: Spec, label: str) -> None:
    """The preconditions of a REFUTED (`[[verdict.requires]]`) are whole now, not when a run first refutes."""
    from bench.stats import sensitivity

    try:
        sensitivity.check_requires(spec.rule_params().get("requires"))
    except (ValueError, TypeError) as exc:
        raise SpecError(f"{exc}{label}", path=spec.path, key="verdict.requires",
                        line=find_line(_text(spec.path), "verdict", "requires")) from None


def _check_corpora(spec: Spec, label: str) -> None:
    """Every corpus a spec names resolves now (source, variant, files), not halfway through a run."""
    params = spec.probe_params()
    for name in [k for k in params if k == "corpus" or k.endswith("_corpus")]:
        section = "data" if name in spec.data else "measure"
        value = params[name]
        where = dict(path=spec.path, key=f"{section}.{name}", line=find_line(_text(spec.path), section, name))
        if not isinstance(value, str):
            raise SpecError(f"must be a corpus name (a string), got {type(value).__name__}{label}", **where)
        try:
            _resolves(value)
        except SpecError as exc:
            raise SpecError(_bare(exc) + label, **where) from None
        except (OSError, ValueError, KeyError, TypeError, UnicodeError) as exc:
            raise SpecError(f"corpus '{value:.80}' cannot be read: {type(exc).__name__}: {exc}"[:300] + label,
                            **where) from None


@functools.lru_cache(maxsize=256)
def _resolves(corpus: str) -> bool:
    """Whether `corpus` resolves (raises SpecError when not); a success is remembered for this process, so
    checking many specs over one large corpus hashes its files once."""
    corpora.fingerprint(corpus)
    return True


def _bare(exc: SpecError) -> str:
    """A SpecError's message without its own `[key]` prefix (the caller adds file, key and line)."""
    msg = str(exc)
    return msg.split("] ", 1)[1] if msg.startswith("[") and "] " in msg else msg


def _text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return ""
