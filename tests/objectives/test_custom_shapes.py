"""The user's own model and data on the trial's path: a model that takes only some batch sizes, soft-label
targets, a classifier registered before its body. Real torch (tests/misfit_objective.py), run_trial in process."""

import pytest

from objectives import run_trial

M = "misfit_objective"


def trial(model="Net", target="classes", **cfg):
    objective = {
        "name": "custom",
        "model": {"_target_": f"{M}.{model}"},
        "train_dataset": {"_target_": f"{M}.Blobs", "size": 512, "seed": 1, "target": target},
        "val_dataset": {"_target_": f"{M}.Blobs", "size": 256, "seed": 2, "target": target},
    }
    return run_trial({"objective": objective, "batch_size": 32, "train": {"budget_samples": 1024}, **cfg})


def test_a_model_that_takes_only_some_batch_sizes_is_counted_on_a_batch_it_takes(capfd):
    """Every trial crashed with 'batch 1 must be a multiple of 32': FLOPs were counted on one sample."""
    plain, picky = trial(), trial("Picky")
    assert picky.outcome == "ok", picky.reason
    assert picky.metrics["flops_per_sample"] == plain.metrics["flops_per_sample"] > 0  # still per sample
    assert "FLOPs are counted, and model pruning traced, on an example batch of batch_size=32" in capfd.readouterr().err


def test_a_model_that_takes_no_example_batch_says_what_was_being_done():
    with pytest.raises(RuntimeError, match=r"counting FLOPs on an example batch of 1 sample and of batch_size=4 "
                                           r"samples .*batch 4 must be a multiple of 8\); fix: make the model's "
                                           r"forward take a batch of 1 or of batch_size samples"):
        trial("Picky", batch_size=4)


def test_soft_label_targets_train_with_the_default_loss_and_give_accuracy():
    """One-hot float targets failed in the default loss ('Expected input batch_size (64) to match target batch_size
    (640)'): F.cross_entropy takes class probabilities of the logits' shape, and accuracy reads their argmax."""
    onehot, classes = trial(target="onehot"), trial()
    assert onehot.outcome == "ok", onehot.reason
    assert onehot.metrics["val_accuracy"] == classes.metrics["val_accuracy"] > 0.5  # chance is 0.25
    assert onehot.metrics["val_loss"] == pytest.approx(classes.metrics["val_loss"], rel=1e-5)


def test_structured_model_pruning_keeps_a_head_registered_before_the_body():
    """The head was taken to be the last registered nn.Linear: a `self.classifier` defined before `self.body` was
    cut from 4 outputs to 2, and every trial crashed (IndexError: target out of bounds)."""
    result = trial("HeadFirst", model_pruning={"ratio": 0.5, "method": "structured"})
    assert result.outcome == "ok", result.reason
    assert result.metrics["params_count"] < 0.7 * result.metrics["params_count_before_model_pruning"]
    assert result.metrics["val_accuracy"] > 0.5  # chance is 0.25


def test_output_layers_follow_the_forward_not_the_registration_order():
    import torch
    from torch import nn

    from objectives.custom import output_layers
    from misfit_objective import HeadFirst

    model = HeadFirst()
    assert output_layers(model, torch.zeros(1, 16)) == ([model.body[0]], [model.classifier])
    from objectives.config import CustomConfig
    from objectives.custom import custom_workload

    work = custom_workload(CustomConfig(name="custom", model={"_target_": f"{M}.HeadFirst"},
                                        train_dataset={"_target_": f"{M}.Blobs"}))
    assert work.model_pruning_ignored == [work.model.classifier]
    assert work.semi_sparse_kept == [work.model.body[0], work.model.classifier]  # 2:4 too: input layer and head
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    assert output_layers(conv, torch.zeros(1, 3, 8, 8)) == ([], [conv[2]])  # the last it ran: a 1x1 conv head


def test_model_pruning_that_changes_the_output_shape_is_refused_in_one_line():
    from objectives.knobs.model_pruning import ModelPruningConfig, prune_and_count
    from objectives.workload import Workload
    from misfit_objective import Blobs, HeadFirst

    import torch

    model = HeadFirst()
    work = Workload(Blobs(), None, model, torch.zeros(1, 16), model_pruning_ignored=[model.body[0]])  # not the head
    with pytest.raises(RuntimeError, match=r"model pruning must leave the model's output shape as it is; got \(1, 4\) "
                                           r"before and \(1, 2\) after structured model pruning .* keeps whole "
                                           r"body.0\); fix: model_pruning.method=unstructured"):
        prune_and_count(ModelPruningConfig(0.5, "structured"), work, applies=True)


def test_an_evaluation_batch_the_model_does_not_take_is_named():
    """The last validation batch holds what is left (here 100 of 100 samples at batch 512)."""
    objective = {"name": "custom", "model": {"_target_": f"{M}.Picky"},
                 "train_dataset": {"_target_": f"{M}.Blobs", "size": 256},
                 "val_dataset": {"_target_": f"{M}.Blobs", "size": 100, "seed": 2}}
    with pytest.raises(RuntimeError, match=r"evaluating on the validation set in batches of 512 "
                                           r"\(train.eval_batch_size\) failed on a batch of 100 samples"):
        run_trial({"objective": objective, "batch_size": 32, "train": {"budget_samples": 256}})
