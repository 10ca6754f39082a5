"""What a test prediction sees besides the target text: nothing, a translation read from a file, or
the task's parallel source-language text (an oracle); translate-test, the baseline that sees the
same; and results.json saying which."""
import json

import pytest

import evaluate
import train
from minxlt import tasks
from minxlt.errors import InputError

COMMON = ["--target-langs", "de,zh", "--batch-size", "8", "--max-steps", "4", "--eval-every", "4", "--no-alignment", "--lr", "3e-3"]


def run(tmp_path, tiny_model_dir, name, *args):
    train.main(["--model", str(tiny_model_dir), *COMMON, "--out", str(tmp_path / name), *args])
    return json.loads((tmp_path / name / "results.json").read_text())


def write_translations(directory, task, lang_of_text="en"):
    """<lang>.tsv files of id TAB text, each test text translated as the source's parallel text."""
    directory.mkdir(parents=True, exist_ok=True)
    english = {e.id: e.text for e in task.test[lang_of_text]}
    for lang in task.targets:
        (directory / f"{lang}.tsv").write_text("".join(f"{e.id}\t{english[e.id]}\n" for e in task.test[lang]), encoding="utf-8")
    return directory


def test_translate_test_on_the_oracle_scores_english_in_every_language(tmp_path, tiny_model_dir):
    # the bundled corpus is parallel: each test text's source-language counterpart is its English original,
    # so translate-test on the oracle is the English score again, in every language
    results = run(tmp_path, tiny_model_dir, "tt", "--method", "translate-test")
    assert results["de"]["accuracy"] == results["zh"]["accuracy"] == results["en"]["accuracy"]
    assert results["test_input"]["input"] == "oracle" and "upper bound" in results["test_input"]["what"]
    assert "each prediction saw the task's parallel source-language text" in (tmp_path / "tt" / "results.md").read_text()
    # the same model (zero-shot's training, the same seed), its predictions on the texts themselves
    plain = run(tmp_path, tiny_model_dir, "zs", "--method", "zero-shot")
    assert plain["en"] == results["en"] and plain["test_input"]["input"] == "text"


def test_translations_from_a_file_and_in_xtreme_layout(tmp_path, tiny_model_dir):
    task = tasks.load_task("demo", targets=["de", "zh"])
    folder = write_translations(tmp_path / "mt", task)
    oracle = run(tmp_path, tiny_model_dir, "oracle", "--method", "filter")
    translated = run(tmp_path, tiny_model_dir, "mt-run", "--method", "filter", "--test-translations", str(folder))
    assert translated["test_input"] == {"input": "translation", "translations": str(folder),
                                        "what": "the target's machine translation into the source language (--test-translations)"}
    # translations that are the English originals give the oracle's scores
    assert {l: translated[l]["accuracy"] for l in ("de", "zh")} == {l: oracle[l]["accuracy"] for l in ("de", "zh")}
    # XTREME's layout: test-<lang>-en-translated.tsv, line i for the i-th test example, no ids
    xtreme = tmp_path / "translate-test"
    xtreme.mkdir()
    for lang in ("de", "zh"):
        english = {e.id: e.text for e in task.test["en"]}
        (xtreme / f"test-{lang}-en-translated.tsv").write_text("".join(f"{english[e.id]}\t_\tx\n" for e in task.test[lang]))
    again = run(tmp_path, tiny_model_dir, "xtreme", "--method", "filter", "--test-translations", str(xtreme / "test-{lang}-en-translated.tsv"))
    assert {l: again[l]["accuracy"] for l in ("de", "zh")} == {l: oracle[l]["accuracy"] for l in ("de", "zh")}
    # evaluate.py tests the checkpoint on what its run was tested on, or on what it is told
    evaluate.main(["--checkpoint", str(tmp_path / "mt-run" / "best"), "--test-translations", str(folder)])
    saved = json.loads((tmp_path / "mt-run" / "results_test.json").read_text())
    assert saved["test_input"]["input"] == "translation" and saved["de"]["accuracy"] == translated["de"]["accuracy"]


def test_missing_and_misplaced_translations(tmp_path, tiny_model_dir):
    task = tasks.load_task("demo", targets=["de", "zh"])
    folder = write_translations(tmp_path / "mt", task)
    lines = (folder / "zh.tsv").read_text().splitlines()
    (folder / "zh.tsv").write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(tasks.DataError, match=r"zh.tsv: no translation of 1 of the 128 examples of zh, first ids \['weather.8.1'\]"):
        run(tmp_path, tiny_model_dir, "a", "--method", "xmixup", "--test-translations", str(folder))
    with pytest.raises(InputError, match="--test-input translation needs --test-translations"):
        run(tmp_path, tiny_model_dir, "b", "--method", "filter", "--test-input", "translation")
    with pytest.raises(InputError, match="zero-shot tested on the target text alone reads no translations"):
        run(tmp_path, tiny_model_dir, "c", "--method", "zero-shot", "--test-translations", str(folder))
    with pytest.raises(InputError, match="translate-test predicts from .* not from the target text alone"):
        run(tmp_path, tiny_model_dir, "d", "--method", "translate-test", "--test-input", "text")


def test_filter_and_xmixup_on_the_text_alone(tmp_path, tiny_model_dir):
    for method in ("filter", "xmixup"):
        results = run(tmp_path, tiny_model_dir, method, "--method", method, "--test-input", "text")
        assert results["test_input"]["input"] == "text"
    ablation = run(tmp_path, tiny_model_dir, "plain", "--method", "xmixup", "--no-mixup-inference")
    assert ablation["test_input"]["input"] == "text"
