"""Every method on a tiny pre-LN encoder (XLM-R XL and XXL's layout) through the command line:
trained, stopped and resumed to the same losses, tested, exported and evaluated again from OUT/best."""
import json

import pytest

import evaluate
import train
from model import Classifier, Encoder

COMMON = ["--target-langs", "de", "--batch-size", "8", "--max-steps", "2", "--eval-every", "2", "--no-alignment"]
LEVELS = {"sentence": ["--task", "demo"], "word": ["--task", "demo-slots"]}


CASES = [(method, level) for level, methods in {
    "sentence": ["zero-shot", "translate-train", "translate-test", "xeroalign", "filter", "xmixup", "xmixup-in-attention",
                 "contrastive", "unicoder"],
    "word": ["zero-shot", "translate-train", "xeroalign", "filter", "unicoder"],  # X-Mixup's word labels need a labeller (test_mixup)
    "span": ["zero-shot", "translate-train", "xeroalign", "filter", "xmixup", "unicoder"]}.items() for method in methods]


@pytest.mark.parametrize("method,level", CASES)
def test_every_method_trains_tests_and_exports_on_a_pre_ln_encoder(tmp_path, xl_model_dir, method, level):
    out = tmp_path / "run"
    extra = {"contrastive": ["--sa-steps", "1"], "xmixup-in-attention": ["--mixup-variant", "in-attention"]}.get(method, [])
    if level == "span":  # a small XQuAD-layout folder, parallel, so that the target has translations
        from test_qa import PEOPLE, write_squad
        for lang in ("en", "de"):
            write_squad(tmp_path, lang, [("Article 0", PEOPLE * 2), ("Article 1", PEOPLE), ("Article 6", PEOPLE[1:3]), ("Article 7", PEOPLE)])
        extra += ["--task", "xquad", "--data", str(tmp_path), "--max-length", "40", "--doc-stride", "6"]
    argv = ["--model", str(xl_model_dir), *COMMON, *LEVELS.get(level, []), "--method", method.split("-in-")[0]] + extra
    train.main(argv + ["--out", str(out)])
    train.main(argv + ["--out", str(tmp_path / "split"), "--stop-at", "1"])  # stopped after a step, then resumed
    train.main(argv + ["--out", str(tmp_path / "split"), "--resume"])
    losses = lambda run: [r["loss"] for r in map(json.loads, (run / "log.jsonl").read_text().splitlines()) if "loss" in r]
    assert losses(tmp_path / "split") == losses(out) and len(losses(out)) == 2
    config = json.loads((out / "best" / "config.json").read_text())
    assert config["model_type"] == "xlm-roberta-xl" and "encoder.LayerNorm.weight" in (out / "best" / "model.safetensors").read_bytes().decode("latin-1")
    if method == "unicoder":  # an encoder with its XL masked-LM head
        assert config["architectures"] == ["XLMRobertaXLForMaskedLM"] and Encoder.from_pretrained(out / "best").lm_head is not None
        return
    results = json.loads((out / "results.json").read_text())
    assert set(results["de"]) >= {"n"}
    model, _, _ = Classifier.load(out / "best")
    assert model.encoder.config.pre_norm
    evaluate.main(["--checkpoint", str(out / "best"), "--out", str(tmp_path / "eval")])  # OUT/best evaluated again, alone
    assert json.loads((tmp_path / "eval" / "results_test.json").read_text())["de"] == results["de"]


def test_a_pre_ln_run_resumes_to_the_same_losses_and_evaluates(tmp_path, xl_model_dir):
    argv = ["--model", str(xl_model_dir), *COMMON, "--max-steps", "4", "--log-every", "1", "--method", "xeroalign"]
    train.main(argv + ["--out", str(tmp_path / "whole")])
    train.main(argv + ["--out", str(tmp_path / "split"), "--stop-at", "2"])
    train.main(argv + ["--out", str(tmp_path / "split"), "--resume"])
    losses = lambda run: [r["loss"] for r in map(json.loads, (tmp_path / run / "log.jsonl").read_text().splitlines()) if "loss" in r]
    assert losses("whole") == losses("split") and len(losses("whole")) == 4
    evaluate.main(["--checkpoint", str(tmp_path / "whole" / "best"), "--out", str(tmp_path / "eval")])
    again = json.loads((tmp_path / "eval" / "results_test.json").read_text())
    assert again["de"] == json.loads((tmp_path / "whole" / "results.json").read_text())["de"]
