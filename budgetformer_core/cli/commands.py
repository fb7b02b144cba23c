"""What each ``budgetformer`` subcommand does (:mod:`budgetformer_core.cli` parses its options):
a thin wrapper of a core function per command, printing a table or JSON."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import shlex
import sys
import unicodedata
from pathlib import Path

import torch

from ..analysis.infer import check_texts, evaluate_split, pair_columns, predict_rows
from ..config import ModelConfig, TrainConfig
from ..io.checkpoint import Checkpoint, check_out_dir
from ..io.data import load_dataset, source_path
from ..io.files import json_safe, read_json
from ..io.inputs import MAX_CHARS, input_rows
from ..io.loader import load_checkpoint
from ..io.outputs import check_not_source, check_output_file, output_lock, write_atomic
from ..io.splits import Split
from ..measure.bench import bench, bench_lengths
from ..model.budget import Control, ablation
from ..model.encoder import BudgetFormer
from ..overrides import apply_overrides
from ..shipped import MANIFEST, model_table, resolve_checkpoints, sweeps_csv
from ..train import distributed


def shown(text: str) -> str:
    """``text`` (a class name) on one line of a terminal: control characters (line breaks, tabs,
    escape sequences) written as escapes (``\\n``, ``\\x1b``), so a name cannot forge lines or colours."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)


def dumps(obj, **kw) -> str:
    """One line of valid JSON: NaN and infinity are written as null."""
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


def cmd_models(args: argparse.Namespace) -> int:
    rows = model_table()
    if not rows:
        raise ValueError(f"no shipped models: {MANIFEST} is missing")
    if args.json:
        print(dumps(rows))
        return 0
    pct = lambda x: "n/a" if x is None else f"{x:.1%}"  # noqa: E731
    table = [("name", "dataset", "method", "accuracy", "heads run")]
    table += [(r["name"], r["dataset"] or "n/a", r["method"] or "n/a", pct(r["accuracy"]), pct(r["heads_run"]))
              for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from ..train.loop import train  # keeps `predict` start-up light
    from ..train.resume import read_run, resume_dir
    from .parser import build_parser  # the parser of the run's recorded command

    if args.resume:  # the run's own arguments, as its resume folder records them
        given = [a for a in args.argv[1:]
                 if a not in ("--resume", args.resume, f"--resume={args.resume}", "--quiet", "--force")]
        if given:
            raise ValueError(f"--resume continues a run with the arguments it was started with; "
                             f"give only --resume DIR [--quiet] [--force], not {shlex.join(given)}")
        typed_force = args.force  # only what is typed now grants --force, never the recorded run
        run = read_run(args.resume)
        argv = shlex.split(run.get("command") or "")[1:]  # "budgetformer train ..." → ["train", ...]
        if argv[:1] != ["train"]:
            raise ValueError(f"{args.resume}/run.json does not record the budgetformer train command of its run")
        quiet, state_dir = args.quiet, args.resume
        args = resolve_checkpoints(build_parser().parse_args(argv))
        args.argv, args.quiet, args.force, args.resume = argv, args.quiet or quiet, typed_force, True
        if args.out is None or resume_dir(args.out).resolve() != Path(state_dir).resolve():
            raise ValueError(f"{state_dir} holds the state of the run writing --out {args.out} (a path relative to "
                             "the folder it was started in): resume it from there")
    missing = [f"--{name}" for name in ("dataset", "out") if getattr(args, name) is None]
    if missing:
        raise ValueError(f"train needs {' and '.join(missing)} (or --resume DIR)")
    on_base = True  # whether the model may read another length than it starts at
    if args.backbone is not None:  # the pretrained encoder's shape; --set changes the rest
        from ..io.pretrained import backbone_config

        shape = dataclasses.replace(backbone_config(args.backbone), method=args.method)
    elif args.init is not None:  # the warm start's input length unless --set changes it
        length, on_base = init_length(args.init)
        shape = ModelConfig(method=args.method, max_len=length)
    else:
        shape = ModelConfig(method=args.method)
    model_cfg, train_cfg = apply_overrides(shape, TrainConfig(), args.set)
    if model_cfg.max_len != shape.max_len and not on_base:
        raise ValueError(f"--init {args.init} was trained from scratch at max_len={shape.max_len}: its position "
                         f"table has {shape.max_len} rows, so it cannot go on at max_len={model_cfg.max_len} "
                         "(a model fine-tuned from a pretrained base can)")
    backbone_dir = args.backbone if args.backbone and Path(args.backbone).is_dir() else None
    check_not_source(args.out, {"--init": args.init, "--backbone": backbone_dir})
    check_out_dir(args.out, force=args.force)  # before the data is read and the run starts
    dataset = load_dataset(args.dataset, args.data_dir, seed=args.split_seed)
    # --force only lets an existing checkpoint be replaced: the recorded command is the one without it
    command = {"command": shlex.join(["budgetformer", *(a for a in args.argv if a != "--force")])}
    first = int(os.environ.get("RANK", "0")) == 0  # under torchrun the first process holds the lock
    lock = output_lock(args.out) if first else contextlib.nullcontext()
    with lock, distributed.process_group():  # one run at a time on --out; one process, or one of torchrun's
        result = train(dataset, model_cfg, train_cfg, args.out, progress=not args.quiet, init=args.init, meta=command,
                       force=args.force, resume=bool(args.resume), backbone=args.backbone)
        if distributed.is_main():  # under torchrun rank 0 alone prints
            print(dumps({"checkpoint": str(result.checkpoint), "seconds": round(result.seconds, 1),
                         "world_size": distributed.world_size(), **result.test}))
    return 0


def init_length(init: str | Path) -> tuple[int, bool]:
    """The ``max_len`` of the checkpoint ``init``, and whether it was fine-tuned from a pretrained
    base, whose position table serves other lengths (the default length and True when its config
    cannot be read: loading it then says why)."""
    try:
        config = read_json(Path(init) / "config.json")
        return int(config["model"]["max_len"]), bool(config.get("backbone"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ModelConfig().max_len, True


def open_model(args: argparse.Namespace) -> Checkpoint:
    """The model ``--checkpoint`` names, a classifier's heads ranked on ``--rank-file`` if given."""
    from ..train.rank import open_checkpoint

    return open_checkpoint(args.checkpoint, args.rank_file)


def no_budget(ckpt: Checkpoint) -> str:
    """How a dense model might get a budget: a classifier's heads can be ranked; else none."""
    from ..train.rank import RANK_HINT

    return f" ({RANK_HINT})" if "classifier" in ckpt.meta else ""


def ablation_control(ckpt, args: argparse.Namespace, split) -> Control:
    """The Control for --budget / --ablation (one meaning per name: ``budget.ABLATIONS``).

    ``no-budget-net`` replaces f_θ by a constant s: ``--budget`` if given, else the model's mean
    s on its validation split (the s the trained ablation is given). ``no-head-scorer`` runs the
    first k heads; ``random-heads`` k random heads per input (``--seed``).
    """
    method = ckpt.model.method
    if not method.budgeted and (args.budget is not None or args.ablation):
        raise ValueError("a dense checkpoint has no budget: --budget and --ablation need a budgetformer model"
                         + no_budget(ckpt))
    if not method.predicts_budget and args.ablation:
        raise ValueError("--ablation applies to budgetformer models; a bba model takes --budget")
    if not args.ablation:
        return Control(budget=args.budget)
    control = ablation(args.ablation, ckpt.validation_budget, args.seed)
    return dataclasses.replace(control, budget=args.budget if args.budget is not None else control.budget)


def cmd_fit_budget(args: argparse.Namespace) -> int:
    from ..io.adapter import check_out
    from ..train.fit import fit_budget, fit_data, fit_settings

    fit_settings(args.method, args.set)  # a bad --set fails now, before the base is read
    check_not_source(args.out, {"--checkpoint": args.checkpoint})  # whatever the flags
    check_out(args.out, force=args.force)
    base = load_checkpoint(args.checkpoint)
    split_seed = base.meta.get("split_seed", 0) if args.split_seed is None else args.split_seed
    data = fit_data(args.dataset, base.label_names, args.data_dir, split_seed)
    # --force only lets an existing adapter be replaced: the recorded command is the one without it
    command = {"command": shlex.join(["budgetformer", *(a for a in args.argv if a != "--force")])}
    with output_lock(args.out):
        result = fit_budget(base, data, args.method, args.set, args.out, progress=not args.quiet, meta=command,
                            force=args.force)
    test = {k: v for k, v in (result.test or {}).items() if k not in ("head_usage", "mean_budget_per_layer")}
    print(dumps({"adapter": str(result.adapter), "seconds": round(result.seconds, 1),
                 "bytes": sum(f.stat().st_size for f in result.adapter.iterdir()), **test}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..io.export import check_export_out, export_checkpoint

    check_export_out(Path(args.checkpoint), Path(args.out), args.force)  # before the lock creates anything
    with output_lock(args.out):
        done = export_checkpoint(args.checkpoint, args.out, force=args.force)
    print(f"wrote {done.path}: {done.architecture} in the Hugging Face layout")
    for note in done.notes:
        print(f"note: {note}")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from ..io.tokenizer import encode
    from ..train.prune import head_importance, posthoc_checkpoint

    check_not_source(args.out, {"--checkpoint": args.checkpoint})  # whatever the flags
    dense = load_checkpoint(args.checkpoint)
    if dense.model.method.budgeted:
        raise ValueError("prune ranks the heads of a dense checkpoint")
    check_out_dir(args.out, force=args.force)
    dataset_name, split, rows = checkpoint_split(dense, args, default="validation")
    ids, _ = encode(dense.tokenizer, split.texts, dense.config.max_len)
    importance = head_importance(dense.model, ids, split.labels)
    meta = {"dataset": dataset_name, "init": str(args.checkpoint), "importance": importance.tolist(),
            "command": shlex.join(["budgetformer", *(a for a in args.argv if a != "--force")])}
    with output_lock(args.out):
        posthoc_checkpoint(dense, importance, args.out, meta, force=args.force)
    print(dumps({"checkpoint": args.out, "rows": rows, "importance": importance.tolist()}))
    return 0


def checkpoint_split(ckpt, args: argparse.Namespace, default: str = "test") -> tuple[str, Split, str]:
    """The dataset name, the split that --dataset / --data-dir / --split / --split-seed /
    --limit select, and which rows those are in words.

    Defaults: the checkpoint's own dataset and split seed, its ``default`` split; a single file
    given with --dataset is used whole (``--split all``) unless --split says otherwise. The
    data's labels are mapped to the checkpoint's ``label_names`` (an unknown label, or a dataset
    of another task, is an error).
    """
    dataset_name = args.dataset or ckpt.meta.get("dataset")
    if not dataset_name:
        raise ValueError("the checkpoint does not name its dataset: pass --dataset")
    split_seed = ckpt.meta.get("split_seed", 0) if args.split_seed is None else args.split_seed
    source = source_path(dataset_name, args.data_dir)
    single_file = args.dataset is not None and source is not None and source.is_file()
    args.split = getattr(args, "split", None) or ("all" if single_file else default)
    whole = args.split == "all"
    data = load_dataset(dataset_name, args.data_dir, seed=split_seed, classes=ckpt.label_names, whole=whole)
    split = data.split(args.split)
    n = len(split)
    if getattr(args, "limit", None):
        split = split.head(args.limit)
    where = str(source) if source is not None else dataset_name
    rows = (f"all {n} labelled rows of {where}" if whole else
            f"the {args.split} split ({n} rows, split seed {split_seed}) of {where}")
    if len(split) < n:
        rows = f"the first {len(split)} of {rows}"
    chars = [max(map(len, t)) if isinstance(t, tuple) else len(t) for t in split.texts]  # a pair: its longer text
    too_long = next((i for i, n in enumerate(chars) if n > MAX_CHARS), None)
    if too_long is not None:  # the rule of every surface (predict, the app): budgetformer_core.io.inputs.MAX_CHARS
        raise ValueError(f"text {too_long + 1} of {rows} has {chars[too_long]:,} characters; the limit "
                         f"is {MAX_CHARS:,} (the model reads only its first {ckpt.config.max_len} tokens: cut it)")
    return dataset_name, split, rows


def cmd_analyze(args: argparse.Namespace) -> int:
    from ..analysis.corpus import read_corpus  # pandas / pyarrow: keeps `predict` start-up light
    from ..analysis.runs import analyze_corpus, check_out

    if args.address and args.engine != "ray":
        raise ValueError("--address names a Ray cluster: add --engine ray")
    if args.engine == "ray":
        from ..analysis.ray_engine import import_ray

        import_ray()  # without Ray, one line naming the extra, before any work
    check_not_source(args.out, {"--checkpoint": args.checkpoint, "--dataset": args.dataset})
    check_out(args.out)
    ckpt = load_checkpoint(args.checkpoint)
    if args.budget is not None and not ckpt.model.method.budgeted:
        raise ValueError("a dense checkpoint has no budget: --budget needs a budgeted model" + no_budget(ckpt))
    corpus = read_corpus(ckpt, args.dataset, args.data_dir, args.split, args.split_seed, args.limit)
    with output_lock(args.out):  # one run at a time writes --out
        summary = analyze_corpus(ckpt, corpus, args.out, args.engine, args.budget, args.batch_size, args.workers,
                                 args.address, progress=not args.quiet)
    print(dumps({k: v for k, v in summary.items() if k != "layers"}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    ckpt = open_model(args)
    dataset_name, split, rows = checkpoint_split(ckpt, args)
    control = ablation_control(ckpt, args, split)
    result = evaluate_split(ckpt, split, control, args.mode)
    summary = {"checkpoint": str(args.checkpoint), "dataset": dataset_name, "split": args.split, "rows": rows,
               "budget": args.budget, "ablation": args.ablation, **result.summary()}
    if args.json:
        print(dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k:>22}: {v}")
    return 0


def cmd_adaptivity(args: argparse.Namespace) -> int:
    from ..analysis.adaptivity import adaptivity, load_reference  # pandas / scipy: keeps `predict` start-up light

    ckpt = open_model(args)
    reference = load_reference(args.checkpoint, args.reference)
    dataset_name, split, rows = checkpoint_split(ckpt, args)
    result = adaptivity(ckpt, split, reference, ablation_control(ckpt, args, split))
    summary = {"checkpoint": str(args.checkpoint), "reference": str(reference.path), "dataset": dataset_name,
               "split": args.split, "rows": rows, "budget": args.budget, "ablation": args.ablation,
               **result.to_dict()}
    if args.json:
        print(dumps(summary))
        return 0
    for key in ("checkpoint", "reference", "n", "accuracy", "mean_heads_fraction", "rho_s_reference_loss",
                "heads_ratio_hard_easy", "rho_k_needed", "frac_k_at_least_needed"):
        value = summary[key]
        print(f"{key:>24}: {'n/a' if value is None else round(value, 4) if isinstance(value, float) else value}")
    for i, layer in enumerate(result.layers):
        hist = " ".join(f"{k}:{c}" for k, c in layer.k_hist.items())
        print(f"{'layer ' + str(i):>24}: k {hist} | {layer.distinct_head_sets} head sets, "
              f"{layer.head_set_entropy_bits:.2f} bits, {layer.k_values_over_5pct} k values over 5 %")
    for note in result.notes:
        print(f"{'note':>24}: {note}")
    return 0


def pair_fields(text) -> dict:
    """A pair's two texts as ``predict --json`` names them, ``text`` and ``text_pair``; {} for
    one text (its row carries no text, as before pairs)."""
    return {"text": text[0], "text_pair": text[1]} if isinstance(text, tuple) else {}


def given_pairs(ckpt: Checkpoint, pairs: list[list[str]] | None) -> list[tuple[str, str]]:
    """``--pair FIRST SECOND`` (each given pair) as texts ``ckpt`` reads; ValueError (one line)
    when it reads single texts only."""
    pairs = [tuple(p) for p in pairs or []]
    if pairs and pair_columns(ckpt) is None:
        trained = f" (it was trained on {ckpt.meta['dataset']})" if ckpt.meta.get("dataset") else ""
        raise ValueError(f"--pair: this model reads single texts{trained}; pairs need a model trained on text "
                         "pairs or a Hugging Face classifier")
    return pairs


def cmd_predict(args: argparse.Namespace) -> int:
    ckpt = open_model(args)
    control = Control(budget=args.budget) if args.budget is not None else None
    if control and not ckpt.model.method.budgeted:
        raise ValueError("a dense checkpoint has no budget: --budget needs a budgetformer model" + no_budget(ckpt))
    pairs = given_pairs(ckpt, args.pair)
    if args.text or pairs:
        check_texts([*args.text, *pairs])
    elif not args.input_file:
        raise ValueError("no input: give TEXT arguments, --pair FIRST SECOND or --input-file")
    inputs = ((None, t) for t in [*args.text, *pairs])
    if args.input_file:
        inputs = itertools.chain(inputs, input_rows(args.input_file))
    errors = total = 0
    for p in predict_rows(ckpt, inputs, control):  # the batch page's rows too
        total += 1
        if p.error is not None:
            errors += 1
            print(dumps({"line": p.line, "error": p.error}) if args.json else f"{p.line}: error: {p.error}", flush=True)
        elif args.json:
            line = {} if p.line is None else {"line": p.line}
            print(dumps({**line, **pair_fields(p.text), **p.row}, ensure_ascii=False), flush=True)
        else:
            confidence = max(p.row["probs"].values())
            text = " | ".join(repr(t[:40]) for t in p.text) if isinstance(p.text, tuple) else repr(p.text[:60])
            print(f"{'' if p.line is None else f'{p.line}: '}{shown(p.row['label'])}\t{confidence:.3f}\t"
                  f"k={p.row['k']}\t{text}", flush=True)
    if not total:
        raise ValueError(f"{args.input_file} has no lines")
    if errors:
        print(f"budgetformer predict: {errors} of {total} inputs were not classified (see their rows)", file=sys.stderr)
        return 2
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from ..analysis.explain import explain, top_tokens
    from ..analysis.report import marked

    ckpt = open_model(args)
    method = ckpt.model.method
    if not method.budgeted:
        raise ValueError("a dense checkpoint has no budget to explain: every layer runs all of its heads"
                         + no_budget(ckpt))
    if args.budget is not None and method.predicts_budget:
        raise ValueError("--budget forces s on a budgetformer model, leaving nothing to explain; "
                         "it is the requested budget b of a bba model")
    texts = [*args.text, *given_pairs(ckpt, args.pair)]
    if not texts:
        raise ValueError("no input: give one or more TEXT arguments or --pair FIRST SECOND")
    check_texts(texts)
    control = Control(budget=args.budget) if args.budget is not None else None
    for e in explain(ckpt, texts, control):
        if args.json:
            print(dumps({**pair_fields(e.text), "tokens": e.tokens, "segments": e.segments,
                         "budget_attribution": e.budget_attribution, "attributed": e.attributed, "value": e.value,
                         "budget": e.budget, "k": e.k, "selected_heads": e.selected_heads, "span": e.span},
                        ensure_ascii=False))
            continue
        shown_text = " | ".join(repr(t[:40]) for t in e.text) if isinstance(e.text, tuple) else repr(e.text[:60])
        print(f"{shown_text} ({len(e.tokens)} tokens; attributed: {e.attributed})")
        tokens_marked = dataclasses.replace(e, tokens=marked(e.tokens, e.segments))  # a pair's second text: ²
        for layer, value in enumerate(e.value):
            raised, lowered = top_tokens(tokens_marked, layer)
            fmt = lambda pairs: ", ".join(f"{t!r} {a:+.4f}" for t, a in pairs) or "none"  # noqa: E731
            print(f"  layer {layer}: {value:.4f}, k={e.k[layer]} | raised by {fmt(raised)} | lowered by {fmt(lowered)}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..analysis.report import build_report, time_report

    if (args.text is None) == (args.pair is None):
        raise ValueError("give the TEXT to analyse or --pair FIRST SECOND (one of them)")
    out = check_output_file(args.out, force=args.force)  # before the model is read
    ckpt = load_checkpoint(args.checkpoint)
    control = Control(budget=args.budget) if args.budget is not None else None
    [text] = given_pairs(ckpt, [args.pair]) if args.pair else [args.text]
    check_texts([text])  # before the timing
    latency = None if args.no_timing else time_report(ckpt, text, control, args.reference)
    page = build_report(ckpt, text, control, latency=latency, head=tuple(args.head) if args.head else None)
    check_output_file(out, force=args.force)  # again: it may have appeared while the page was built
    write_atomic(out, page)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB; opens offline in a browser)")
    return 0


def bench_model(args: argparse.Namespace) -> tuple[BudgetFormer, str]:
    """The model to benchmark and where it came from: a checkpoint, or a fresh random model
    of the default shape changed by ``--set`` (its weights do not matter for speed)."""
    if args.checkpoint:
        if args.set:
            raise ValueError("--set changes the shape of a fresh model; a checkpoint has its own shape")
        ckpt = open_model(args)
        if not ckpt.model.method.budgeted:
            raise ValueError("bench needs a budgetformer model: a dense model has no heads to skip" + no_budget(ckpt))
        return ckpt.model, str(args.checkpoint)
    if args.rank_file:
        raise ValueError("--rank-file ranks the heads of a --checkpoint; a random model has nothing to rank")
    model_cfg, train_cfg = apply_overrides(ModelConfig(), TrainConfig(), args.set)
    if train_cfg != TrainConfig():
        raise ValueError("bench takes only model keys in --set (d_model, n_heads, max_len, ...)")
    torch.manual_seed(args.seed)
    settings = ", ".join(args.set) or "default shape"
    return BudgetFormer(model_cfg).eval(), f"random initialisation ({settings})"


def cmd_bench(args: argparse.Namespace) -> int:
    if args.seq_len and args.seq_lens:
        raise ValueError("give --seq-len or --seq-lens, not both")
    model, source = bench_model(args)
    options = dict(batch_size=args.batch_size, threads=args.threads, budgets=args.budgets,
                   repeats=args.repeats, warmup=args.warmup, seed=args.seed, source=source,
                   clock=args.clock, head_sets=args.head_sets)
    if args.seq_lens:
        result = bench_lengths(model, args.seq_lens, **options)
    else:
        result = bench(model, seq_len=args.seq_len, **options)
    print(dumps(result.to_dict()) if args.json else result.table())
    return 0


def cmd_latency_check(args: argparse.Namespace) -> int:
    """Re-time shipped models as the rebuild timed them and compare with sweeps.csv; exit 1 if a
    live speed-up is not within 25 % of the shipped one."""
    import pandas as pd

    from ..io.data import BUILTIN
    from ..measure.latency import CHECK_MODELS, CHECK_TOLERANCE, agrees, live_check

    path = sweeps_csv()
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not there: build precomputed/ first (make precompute)")
    frame = pd.read_csv(path, dtype={"budget": str})
    known = list(dict.fromkeys(frame["dataset"]))
    unknown = sorted(set(args.datasets) - set(known))
    if unknown:
        raise ValueError(f"unknown dataset {', '.join(unknown)}; choose from {', '.join(known)}")
    if "dense_latency_ms" not in frame.columns:
        raise ValueError("sweeps.csv has no dense_latency_ms column: re-time it (make precompute "
                         "PRECOMPUTE_ARGS=--retime)")
    absent = [d for d in args.datasets if d not in BUILTIN]
    if absent and not args.data_dir:
        raise FileNotFoundError(f"the test texts of {', '.join(absent)} are not shipped: pass --data-dir DIR, "
                                "a local copy (the dataset's folder, or the folder holding it)")
    if args.json:  # a folder, a device or a model folder fails now, not after minutes of timing
        check_output_file(args.json, force=True, option="--json")
    check = live_check(frame, args.datasets, args.models or list(CHECK_MODELS), data_dir=args.data_dir)
    check["agrees"] = agrees(check)
    shown_columns = {"dataset": "dataset", "model": "model", "budget": "budget", "latency_ms": "shipped ms",
                     "latency_ms_live": "live ms", "speedup_b1": "shipped ×dense", "speedup_b1_live": "live ×dense",
                     "ratio": "live/shipped", "speedup_b32": "shipped ×dense b32",
                     "speedup_b32_live": "live ×dense b32", "agrees": f"within {CHECK_TOLERANCE:.0%}"}
    print(check[list(shown_columns)].rename(columns=shown_columns).round(3).to_string(index=False))
    off = check[~check["agrees"]]
    print(f"{len(check) - len(off)} of {len(check)} live speed-ups (batch 1, against the dense model timed in "
          f"the same rounds) within {CHECK_TOLERANCE:.0%} of sweeps.csv")
    if args.json:  # the table above is kept whatever happens to the file
        try:
            write_atomic(args.json, dumps({"tolerance": CHECK_TOLERANCE, "rows": check.to_dict("records")}) + "\n")
        except OSError as e:
            print(f"budgetformer latency-check: error: --json {args.json} was not written ({e.strerror or e}); "
                  "the results are printed above", file=sys.stderr)
            return 2
    return 1 if len(off) else 0
