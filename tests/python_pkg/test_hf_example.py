"""examples/hf_llama_attention.py on the CPU (float32): flashattn registered in transformers'
attention registry gives the model's logits within the contract's bound, with and without
padding, and trains. Skipped where transformers is not installed, or older than 4.53."""

import runpy
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
# The example uses the attention and mask registries of transformers 4.53 and newer.
pytest.importorskip("transformers.masking_utils", reason="transformers older than 4.53 (no masking_utils)")

from fa_check import REPO  # noqa: E402


def test_hf_llama_example_on_cpu(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["hf_llama_attention.py", "--device", "cpu", "--seq", "64"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO / "examples" / "hf_llama_attention.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert done.value.code == 0, printed
    assert "PASS" in printed
