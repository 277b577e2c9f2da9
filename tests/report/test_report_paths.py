"""Reports and records name no machine folders; library progress bars stay out of bench's output."""

from __future__ import annotations

import json
import shutil


def test_report_and_record_have_no_machine_paths(cli, specs_dir, tiny_model_dir, chdir_tmp):
    d = chdir_tmp / "specs" / "circuits"
    d.mkdir(parents=True)
    shutil.copy(specs_dir / "circuits" / "norm-folding-is-exact.toml", d)
    r = cli("verify", d, "--models", tiny_model_dir, "--no-pdf", "--report-dir", chdir_tmp / "reports")
    assert r.exit_code == 0, r.output
    (run_dir,) = (chdir_tmp / "runs").iterdir()
    record = (run_dir / "record.json").read_text()
    assert str(chdir_tmp) not in record  # spec path relative to the specs root, command relative to the cwd
    html = (chdir_tmp / "reports" / run_dir.name / "index.html").read_text()
    assert str(chdir_tmp) not in html
    # the model's full location appears once, in the provenance table; everywhere else its short name
    assert html.count(str(tiny_model_dir.resolve())) == 1 and tiny_model_dir.name in html
    assert "{&#39;" not in html and "{'" not in html  # rules in words, not dict reprs
    assert json.loads(record)["cells"][0]["model"] == tiny_model_dir.name


def test_gguf_conversion_bar_is_silenced(capsys):
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    from bench.models.loading import _no_conversion_bar

    original = gguf_utils.tqdm
    with _no_conversion_bar():
        assert list(gguf_utils.tqdm(range(50), desc="Converting and de-quantizing GGUF tensors...")) == list(range(50))
    assert gguf_utils.tqdm is original  # restored
    err = capsys.readouterr().err
    assert "Converting" not in err and "it/s" not in err
