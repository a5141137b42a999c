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
