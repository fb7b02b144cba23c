"""Config validation: types, finite numbers and ranges are checked where a value is read."""

from __future__ import annotations

import pytest

from budgetformer_core.config import (
    STATED_IF_CHANGED,
    ModelConfig,
    TrainConfig,
    dumps,
    model_config_from_dict,
    stored_method,
    to_dict,
)
from budgetformer_core.overrides import apply_overrides


@pytest.mark.parametrize("item, message", [
    ("lr=inf", "lr must be a finite number"),
    ("lr=nan", "lr must be a finite number"),
    ("tau=nan", "tau must be a finite number"),
    ("tau=inf", "tau must be a finite number"),
    ("grad_clip=nan", "grad_clip must be a finite number"),
    ("grad_clip=-1", "grad_clip must be > 0"),
    ("weight_decay=nan", "weight_decay must be a finite number"),
    ("weight_decay=-0.1", "weight_decay must be >= 0"),
    ("lambda_budget=nan", "lambda_budget must be a finite number"),
    ("lambda_entropy=-inf", "lambda_entropy must be a finite number"),
    ("beta_end=nan", "beta_end must be a finite number"),
    ("fixed_budget=nan", "fixed_budget must be a finite number"),
    ("label_smoothing=1.5", "label_smoothing must be in"),
    ("max_train=-5", "max_train must be >= 0"),
    ("length_groups=-1", "length_groups must be >= 0"),
    ("new_lr=-1e-3", "new_lr must be >= 0"),
    ("budget_hidden=0", "budget_hidden must be >= 1"),
    ("max_len=8000000", "max_len must be <= 65,536"),
    ("vocab_size=1", "vocab_size must be >= 3"),
    ("d_model=65536", "weights"),
    ("budget_hidden=1000000000", "weights"),
    ("n_heads=four", "expected int"),
    ("norm=sandwich", "norm must be 'pre' or 'post'"),
    ("activation=swish", "activation must be one of gelu, gelu_tanh, relu, silu, tanh"),
    ("type_vocab_size=-1", "type_vocab_size must be >= 0"),
    ("layer_norm_eps=0", r"layer_norm_eps must be in \(0, 1\)"),
    ("method=bba,summary_norm=true", "a bba model has neither"),
    ("method=sparse", "method must be dense, budgetformer or bba"),
    ("difficulty_from=dense", "difficulty_from must be 'model' or 'init'"),
])
def test_bad_overrides_are_refused_with_the_field_named(item, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(ModelConfig(), TrainConfig(), item.split(","))


@pytest.mark.parametrize("field, value, message", [
    ("n_heads", "8", "n_heads must be an integer"),
    ("n_heads", 8.0, "n_heads must be an integer"),
    ("tau", float("nan"), "tau must be a finite number"),
    ("dropout", "0.1", "dropout must be a number"),
    ("shared_budget", 1, "shared_budget must be true or false"),
    ("max_len", 8_000_000, "max_len must be <= 65,536"),
    ("vocab_size", 1, "vocab_size must be >= 3"),
    ("kept_heads", [["0"], ["1"]], "kept_heads must be a list"),
    ("n_classes", 10**10, "weights"),
])
def test_config_json_values_are_checked_before_use(field, value, message):
    with pytest.raises(ValueError, match=message):
        model_config_from_dict({"n_layers": 2, field: value})


def test_defaults_and_ints_for_floats_are_accepted():
    ModelConfig(tau=1, dropout=0)
    TrainConfig(lr=1, grad_clip=5)
    model, train = apply_overrides(ModelConfig(), TrainConfig(), ["lr=3e-3", "max_train=0", "tau=0.5"])
    assert (train.lr, train.max_train, model.tau) == (3e-3, 0, 0.5)


def test_the_method_is_stored_under_its_older_key():
    """config.json's ``model`` section keeps the key ``variant``, in the field's place."""
    stored = to_dict(ModelConfig(method="bba"))
    assert "method" not in stored and stored["variant"] == "bba" and stored_method(stored) == "bba"
    assert list(stored).index("variant") == [f for f in ModelConfig.__dataclass_fields__].index("method")
    assert '"variant": "bba"' in dumps(ModelConfig(method="bba"))
    assert "variant" not in to_dict(TrainConfig())
    full = {**stored, "head_weighting": "gated", "gate_source": "embedding"}
    assert model_config_from_dict(full) == ModelConfig(method="bba")
    as_field = {("method" if k == "variant" else k): v for k, v in full.items()}
    assert model_config_from_dict(as_field).method == "bba" and stored_method(as_field) == "bba"
    with pytest.raises(ValueError, match="states the method twice"):
        model_config_from_dict({**full, "method": "bba"})
    assert stored_method({"n_layers": 2}) is None and stored_method({}, "?") == "?"


@pytest.mark.parametrize("overrides", [["method=dense"], ["variant=dense"], {"method": "dense"}, {"variant": "dense"}])
def test_the_method_is_set_by_its_name_or_its_stored_key(overrides):
    model, _ = apply_overrides(ModelConfig(), TrainConfig(), overrides)
    assert model.method == "dense"


def test_fields_added_since_the_shipped_models_are_stated_only_when_set():
    """A model without factorised embeddings or another pooler non-linearity is written as
    before those fields existed (the shipped configs byte for byte), and one with them reads back."""
    assert not set(STATED_IF_CHANGED) & set(to_dict(ModelConfig()))
    cfg = ModelConfig(embedding_size=16, pooler_activation="relu", pooling="pooler")
    stated = to_dict(cfg)
    assert (stated["embedding_size"], stated["pooler_activation"]) == (16, "relu")
    assert model_config_from_dict(stated) == cfg
