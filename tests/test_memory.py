"""train.py --dry-run: the memory plan from config.json alone, its counts against a real model's."""
import contextlib
import io
import json

import pytest

from minxlt.parallel import memory
from model import Config, Encoder

XXL = {"model_type": "xlm-roberta", "architectures": ["XLMRobertaXLForMaskedLM"], "vocab_size": 250880, "hidden_size": 4096,
       "num_hidden_layers": 48, "num_attention_heads": 32, "intermediate_size": 16384, "max_position_embeddings": 514,
       "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5}
XL = dict(XXL, hidden_size=2560, num_hidden_layers=36, intermediate_size=10240)


def test_counts_are_the_real_models():
    config = Config(vocab_size=101, hidden_size=36, num_layers=3, num_heads=3, ffn_size=37, max_positions=40, model_type="xlm-roberta-xl")
    real = Encoder(config)
    assert memory.count_parameters(config) == (sum(p.numel() for p in real.parameters()),) * 2
    total, trainable = memory.count_parameters(config, freeze_embeddings=True)
    assert total - trainable == real.embeddings.word.weight.numel()
    p = memory.plan(config, 4)
    assert p["ddp"] == {"parameters": 4 * total, "gradients": 4 * total, "AdamW moments": 8 * total, "DDP's gradient buckets": 4 * total}
    first = sum(-(-p.shape[0] // 4) * p[0].numel() for p in real.parameters())  # ceil(rows / 4) rows of each on the first process
    assert p["sharded"] == {"parameters": 4 * first, "gradients": 4 * first, "AdamW moments": 8 * first}
    assert memory.plan(config, 1)["sharded"] == {k: v for k, v in memory.plan(config, 1)["ddp"].items()}
    assert memory.plan(config, 4, teacher=True)["ddp"]["the teacher"] == 4 * total  # FILTER's self-teaching keeps one per process
    assert memory.plan(config, 4, teacher=True)["sharded"]["the teacher"] == memory.plan(config, 4)["sharded"]["parameters"]  # or its rows


def dry_run(tmp_path, config, *args):
    """What `train.py --dry-run` prints for a model of `config` (run in this process: it builds no tensor)."""
    import train
    (tmp_path / "config.json").write_text(json.dumps(config))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        train.main(["--dry-run", "--model", str(tmp_path), *args])
    return printed.getvalue()


def test_xxl_on_eight_processes_under_ddp_does_not_fit_and_says_what_would(tmp_path):
    out = dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--device-memory", "80")
    assert "10.70 B parameters" in out and "8 processes" in out
    assert "DDP, per process: parameters 42.8 GB, gradients 42.8 GB, AdamW moments 85.6 GB, DDP's gradient buckets 42.8 GB: 213.9 GB" in out
    assert "does not fit the device's 80 GB under DDP: sharded training (--shard) would hold 27.1 GB per process, which fits" in out  # its step; 32.0 evaluating in float32 (--eval-float32)
    sharded = dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--device-memory", "80", "--shard")
    assert "sharded over 8 (--shard), per process: parameters 5.3 GB, gradients 5.3 GB, AdamW moments 10.7 GB: 21.4 GB" in sharded
    assert "beyond these at most 5.3 GB in forward (the embeddings and the layers gathered whole, with the buffers" in sharded
    assert "and 6.2 GB in backward (a unit's whole gradient beside its weights, or its float32 reduce-scatter buffer" in sharded
    assert "sharded, it fits the device's 80 GB with 52.9 GB left for activations" in sharded
    accumulating = dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--device-memory", "80", "--shard", "--grad-accum", "2",
                           "--batch-size", "32")  # every micro-step reduce-scatters: no whole gradient held between them
    assert "AdamW moments 10.7 GB: 21.4 GB" in accumulating and "whole gradients" not in accumulating
    alone = dry_run(tmp_path, XXL, "--processes", "1", "--amp", "bf16", "--device-memory", "80", "--shard")
    assert "does not fit the device's 80 GB even sharded over 1 process: run more processes (more nodes); --offload keeps" in alone
    offloaded = dry_run(tmp_path, XXL, "--processes", "1", "--amp", "bf16", "--device-memory", "80", "--shard", "--offload")
    assert "with --offload, the parameters, gradients and moments (171.1 GB) are in host memory: the device holds 6.2 GB" in offloaded
    assert "sharded, it fits the device's 80 GB with 73.8 GB left for activations" in offloaded
    assert "--gradient-checkpointing saves activations only" in out


def test_the_plan_gives_each_phase_and_the_largest_decides(tmp_path):
    # XXL on 8 processes at 40 GB: sharded, the step is the peak (its parts and, at the end of backward, the embeddings'
    # whole bf16 gradient and its float32 reduce-scatter buffer, before the rows of their gradient are kept); loading
    # holds its own rows; the test, the rows twice and what a float32 forward gathers; writing OUT/best, all but the
    # gradients and the chunk process 0 receives the others' rows in (bench/shard.py --phases measures these)
    out = dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--device-memory", "40", "--shard", "--eval-float32")
    assert ("sharded, each phase on the device: loading 5.3 GB, step 27.1 GB, dev evaluation 32.0 GB, test 21.4 GB, "
            "writing OUT/best 16.6 GB") in out
    assert "fits the device's 40 GB with 12.9 GB left for activations" in out and "the evaluation on dev leaves 8.0 GB (without --eval-float32" in out
    # a float32 run evaluates in float32 (4 bytes a gathered value), --eval-float32 or not
    plain = [json.loads(dry_run(tmp_path, XXL, "--processes", "8", "--amp", "none", "--shard", "--json", *more))["phases"]["sharded"]
             for more in ([], ["--eval-float32"])]
    assert plain[0] == plain[1] and plain[0]["dev evaluation"] > plain[0]["step"] / 2
    plan = json.loads(dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--device-memory", "40", "--shard", "--json", "--eval-float32"))
    sharded, phases = plan["sharded"], plan["phases"]["sharded"]
    h, f, v = XXL["hidden_size"], XXL["intermediate_size"], XXL["vocab_size"]
    root = v * h + (514 + 1) * h  # the words, the positions and one token type; XXL's embeddings have no LayerNorm
    root_rows = 4 * (-(-v // 8) * h + -(-514 // 8) * h + h)  # the first process's rows of each, in float32
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h  # Q, K, V, O; the FFN; two LayerNorms
    assert plan["step_backward"] == (2 + 4) * root  # bf16 gradient, float32 buffer
    assert plan["step_forward"] == 2 * (2 * root + 3 * layer)  # bf16: the embeddings and a layer with their buffers, the next layer
    assert phases["loading"] == sharded["parameters"]
    assert phases["step"] == sum(sharded.values()) + plan["step_backward"] - root_rows
    assert phases["test"] == 2 * sharded["parameters"] + 4 * (2 * root + 3 * layer)  # gathered in float32
    # the evaluation on dev between steps: in float32 with --eval-float32 (a copy of the rows, gathered in float32), or in bf16
    assert phases["dev evaluation"] == 2 * sharded["parameters"] + sharded["AdamW moments"] + 4 * (2 * root + 3 * layer)
    in_bf16 = json.loads(dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--shard", "--json"))
    assert in_bf16["phases"]["sharded"]["dev evaluation"] == sharded["parameters"] + sharded["AdamW moments"] + 2 * (2 * root + 3 * layer)
    received = 4 * -(-v // 8) * h  # the largest chunk: the words'
    assert phases["writing OUT/best"] == sharded["parameters"] + sharded["AdamW moments"] + received and plan["fits_sharded"]
    frozen = json.loads(dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--shard", "--json", "--freeze-embeddings"))
    assert frozen["step_backward"] == 2 * (root + 2 * layer) + (2 + 4) * layer  # in a layer's backward, once the words are frozen
    taught = json.loads(dry_run(tmp_path, XXL, "--processes", "8", "--amp", "bf16", "--shard", "--json", "--method", "filter",
                                "--teacher", str(teacher_dir(tmp_path))))
    assert taught["sharded"]["the teacher"] == sharded["parameters"] and taught["ddp"]["the teacher"] == 4 * plan["parameters_count"]
    assert taught["phases"]["sharded"]["loading"] == 2 * sharded["parameters"]  # the student's rows and the teacher's
    assert taught["step_forward"] == plan["step_forward"] + 4 * (2 * root + 3 * layer)  # the teacher's forward, in float32


def teacher_dir(tmp_path):
    """A --teacher that the flags accept (a FILTER model's task.json); the plan reads no weights."""
    directory = tmp_path / "teacher"
    directory.mkdir(exist_ok=True)
    (directory / "task.json").write_text(json.dumps({"method": "filter", "labels": ["a", "b"]}))
    return directory


def test_plan_flags_without_dry_run_are_refused(tiny_model_dir, tmp_path):
    import train
    from minxlt.errors import InputError
    with pytest.raises(InputError, match="--json and --device-memory shape the memory plan, which only --dry-run prints: add --dry-run"):
        train.main(["--model", str(tiny_model_dir), "--json", "--device-memory", "40", "--max-steps", "1", "--out", str(tmp_path)])


def test_xl_on_one_process_fits_with_room_for_activations(tmp_path):
    out = dry_run(tmp_path, XL, "--processes", "1", "--device-memory", "80")
    assert "3.48 B parameters" in out and "DDP's gradient buckets" not in out
    assert "fits the device's 80 GB with 24.4 GB left for activations" in out


def test_ddp_under_autocast_plans_the_16_bit_copies_backward_keeps():
    # measured: the 16-bit matrices autograd saves in a step, but activations (a row a token: 2 x 7 rows)
    import torch
    config = Config(vocab_size=500, hidden_size=48, num_layers=3, num_heads=4, ffn_size=80, max_positions=40)
    encoder = Encoder(config)
    saved = {}

    def keep(t):
        if t.dtype == torch.bfloat16 and t.dim() == 2 and len(t) != 2 * 7:
            saved[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        loss = encoder(torch.randint(5, 500, (2, 7)))[0].float().sum()
    loss.backward()
    step = lambda amp: memory.plan(config, 1, amp)["phases"]["ddp"]["step"]
    assert step("bf16") - step("none") == sum(saved.values()) > 0


@pytest.mark.parametrize("args,message", [(["--shard", "--amp", "fp16"], "--shard computes in bf16 or float32"),
                                          (["--offload"], "--offload moves a sharded run's parts to host memory")])
def test_a_plan_of_settings_training_refuses_is_refused_too(tmp_path, args, message):
    from minxlt.errors import InputError
    with pytest.raises(InputError, match=message):
        dry_run(tmp_path, XL, "--processes", "8", *args)
