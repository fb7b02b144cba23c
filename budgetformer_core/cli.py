"""The budgetformer command: train, evaluate and explore models that run some of their attention heads.

A table of subcommands, each a thin wrapper of a core function:

    budgetformer models  (the shipped models: name, dataset, method, accuracy, heads run)
    budgetformer train   --dataset NAME --variant {dense,budgetformer,bba} --out DIR [--init DIR] [--set key=value ...]
                         [--backbone minilm-l6|DIR] [--force]   (or: budgetformer train --resume OUT.resume)
    budgetformer eval    --checkpoint DIR [--dataset D] [--split {test,...,all}] [--budget S] [--ablation A] [--json]
    budgetformer predict --checkpoint DIR [--budget S] [--json] (TEXT ... | --input-file F)
    budgetformer adaptivity --checkpoint DIR [--reference DIR] [--split test] [--budget S] [--json]
    budgetformer explain --checkpoint DIR [--budget B] [--json] TEXT ...
    budgetformer report  --checkpoint DIR [--budget B] --out FILE.html TEXT
    budgetformer bench   (--checkpoint DIR | [--set key=value ...]) [--batch-size N] [--threads T]
                         [--seq-len L | --seq-lens L,L,...] [--repeats R] [--budgets B,B,...]
                         [--clock {wall,cpu}] [--head-sets {input,batch}] [--json]
    budgetformer latency-check [--datasets D ...] [--models M ...] [--json FILE]

Wherever a checkpoint is asked for (--checkpoint, --init, --reference), a folder or the name of
a shipped model (e.g. bbc-budgetformer) is accepted, from any working folder. ``--checkpoint``
also takes a Hugging Face BERT-family sequence classifier's folder
(:mod:`budgetformer_core.classifier`); ``--rank-file F`` ranks such a classifier's heads on F,
which gives it budgets without training.

Errors the user can fix (unknown key, bad checkpoint, empty text, a label the checkpoint does
not know, an existing checkpoint at --out without --force) print one line to stderr and exit
with status 2; no traceback. Ctrl-C prints one line and exits with 130 (train saves its
state first and says how to resume). JSON output writes null for NaN.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import json
import shlex
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

import torch

from . import __version__, distributed
from .bench import BUDGETS, bench, bench_lengths
from .budget import ABLATIONS, HEAD_SETS, Control, ablation
from .checkpoint import Checkpoint, check_out_dir, json_safe, load_checkpoint
from .config import ModelConfig, TrainConfig, apply_overrides
from .data import Split, load_dataset, source_path
from .infer import MAX_CHARS, check_texts, evaluate_split, predict_rows
from .inputs import input_rows
from .model import BudgetFormer


def shown(text: str) -> str:
    """``text`` (a class name) on one line of a terminal: control characters (line breaks, tabs,
    escape sequences) written as escapes (``\\n``, ``\\x1b``), so a name cannot forge lines or colours."""
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)


def dumps(obj, **kw) -> str:
    """One line of valid JSON: NaN and infinity are written as null."""
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


PRECOMPUTED = Path(__file__).resolve().parents[1] / "precomputed"
"""The shipped models (manifest.json, checkpoints/) and their results (results/sweeps.csv)."""

CHECKPOINT_OPTIONS = ("checkpoint", "init", "reference")
"""The options that name a checkpoint: a folder, or a shipped model by name."""


def shipped_runs() -> dict[str, dict]:
    """The runs precomputed/manifest.json lists, by model name (empty without a manifest)."""
    manifest = PRECOMPUTED / "manifest.json"
    return dict(sorted(json.loads(manifest.read_text())["runs"].items())) if manifest.is_file() else {}


def shipped_models() -> dict[str, Path]:
    """Name → folder of every shipped model."""
    return {name: PRECOMPUTED.parent / run["path"] for name, run in shipped_runs().items()}


def resolve_checkpoint(value: str) -> str:
    """``value`` itself when it exists (a folder, or a file the loader then refuses), else the
    folder of the shipped model of that name; neither is a one-line error listing the names."""
    if Path(value).exists():
        return value
    shipped = shipped_models()
    if value in shipped:
        return str(shipped[value])
    raise ValueError(f"checkpoint {value} is not a directory nor a shipped model; the shipped models are: "
                     f"{', '.join(shipped) or 'none (precomputed/manifest.json is missing)'}")


def resolve_checkpoints(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every checkpoint option given resolved by :func:`resolve_checkpoint`."""
    for name in CHECKPOINT_OPTIONS:
        if getattr(args, name, None):
            setattr(args, name, resolve_checkpoint(getattr(args, name)))
    return args


def model_table() -> list[dict]:
    """A row per shipped model: its name, dataset, method, test accuracy and share of heads run,
    read from precomputed/manifest.json and the model's own row of results/sweeps.csv."""
    sweeps = PRECOMPUTED / "results" / "sweeps.csv"
    own = {}
    if sweeps.is_file():
        with sweeps.open(newline="") as f:
            own = {f"{r['dataset']}-{r['model']}": r for r in csv.DictReader(f) if r["budget"] == "own"}
    rows = []
    for name, run in shipped_runs().items():
        r = own.get(name, {})
        model, variant = r.get("model"), r.get("variant")
        detail = ABLATIONS[model].split(":")[0] if model in ABLATIONS else (model or "").removeprefix(f"{variant}-")
        rows.append({"name": name, "dataset": r.get("dataset"),
                     "method": None if not r else variant if model == variant else f"{variant} ({detail})",
                     "accuracy": run.get("test_accuracy"),
                     "heads_run": float(r["heads_fraction"]) if r.get("heads_fraction") else None,
                     "path": run["path"]})
    return rows


def cmd_models(args: argparse.Namespace) -> int:
    rows = model_table()
    if not rows:
        raise ValueError(f"no shipped models: {PRECOMPUTED / 'manifest.json'} is missing")
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
    from .train import read_run, resume_dir, train  # keeps `predict` start-up light

    if args.resume:  # the run's own arguments, as its resume folder records them
        given = [a for a in args.argv[1:] if a not in ("--resume", args.resume, f"--resume={args.resume}", "--quiet")]
        if given:
            raise ValueError(f"--resume continues a run with the arguments it was started with; "
                             f"give only --resume DIR [--quiet], not {shlex.join(given)}")
        run = read_run(args.resume)
        argv = shlex.split(run.get("command") or "")[1:]  # "budgetformer train ..." → ["train", ...]
        if argv[:1] != ["train"]:
            raise ValueError(f"{args.resume}/run.json does not record the budgetformer train command of its run")
        quiet, state_dir = args.quiet, args.resume
        args = resolve_checkpoints(build_parser().parse_args(argv))
        args.argv, args.quiet, args.force, args.resume = argv, args.quiet or quiet, run.get("force", False), True
        if args.out is None or resume_dir(args.out).resolve() != Path(state_dir).resolve():
            raise ValueError(f"{state_dir} holds the state of the run writing --out {args.out} (a path relative to "
                             "the folder it was started in): resume it from there")
    missing = [f"--{name}" for name in ("dataset", "out") if getattr(args, name) is None]
    if missing:
        raise ValueError(f"train needs {' and '.join(missing)} (or --resume DIR)")
    if args.backbone is not None:  # the pretrained encoder's shape; --set changes the rest
        from .backbone import backbone_config

        shape = dataclasses.replace(backbone_config(args.backbone), variant=args.variant)
    else:
        shape = ModelConfig(variant=args.variant)
    model_cfg, train_cfg = apply_overrides(shape, TrainConfig(), args.set)
    check_out_dir(args.out, force=args.force)  # before the data is read and the run starts
    dataset = load_dataset(args.dataset, args.data_dir, seed=args.split_seed)
    # --force only lets an existing checkpoint be replaced: the recorded command is the one without it
    command = {"command": shlex.join(["budgetformer", *(a for a in args.argv if a != "--force")])}
    with distributed.process_group():  # one process, or one of torchrun's
        result = train(dataset, model_cfg, train_cfg, args.out, progress=not args.quiet, init=args.init, meta=command,
                       force=args.force, resume=bool(args.resume), backbone=args.backbone)
        if distributed.is_main():  # under torchrun rank 0 alone prints
            print(dumps({"checkpoint": str(result.checkpoint), "seconds": round(result.seconds, 1),
                         "world_size": distributed.world_size(), **result.test}))
    return 0


def open_model(args: argparse.Namespace) -> Checkpoint:
    """The model ``--checkpoint`` names, a classifier's heads ranked on ``--rank-file`` if given."""
    from .classifier import open_checkpoint

    return open_checkpoint(args.checkpoint, args.rank_file)


def no_budget(ckpt: Checkpoint) -> str:
    """How a dense model might get a budget: a classifier's heads can be ranked; else none."""
    from .classifier import RANK_HINT

    return f" ({RANK_HINT})" if "classifier" in ckpt.meta else ""


def ablation_control(ckpt, args: argparse.Namespace, split) -> Control:
    """The Control for --budget / --ablation (one meaning per name: ``budget.ABLATIONS``).

    ``no-budget-net`` replaces f_θ by a constant s: ``--budget`` if given, else the model's mean
    s on its validation split (the s the trained ablation is given). ``no-head-scorer`` runs the
    first k heads; ``random-heads`` k random heads per input (``--seed``).
    """
    if ckpt.config.variant == "dense" and (args.budget is not None or args.ablation):
        raise ValueError("a dense checkpoint has no budget: --budget and --ablation need a budgetformer model"
                         + no_budget(ckpt))
    if ckpt.config.variant == "bba" and args.ablation:
        raise ValueError("--ablation applies to budgetformer models; a bba model takes --budget")
    if not args.ablation:
        return Control(budget=args.budget)
    control = ablation(args.ablation, ckpt.validation_budget, args.seed)
    return dataclasses.replace(control, budget=args.budget if args.budget is not None else control.budget)


def cmd_prune(args: argparse.Namespace) -> int:
    from .prune import head_importance, posthoc_checkpoint
    from .tokenizer import encode

    dense = load_checkpoint(args.checkpoint)
    if dense.config.variant != "dense":
        raise ValueError("prune ranks the heads of a dense checkpoint")
    check_out_dir(args.out, force=args.force)
    dataset_name, split, rows = checkpoint_split(dense, args, default="validation")
    ids, _ = encode(dense.tokenizer, split.texts, dense.config.max_len)
    importance = head_importance(dense.model, ids, split.labels)
    meta = {"dataset": dataset_name, "init": str(args.checkpoint), "importance": importance.tolist(),
            "command": shlex.join(["budgetformer", *(a for a in args.argv if a != "--force")])}
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
    too_long = next((i for i, t in enumerate(split.texts) if len(t) > MAX_CHARS), None)
    if too_long is not None:  # the rule of every surface (predict, the app): budgetformer_core.infer.MAX_CHARS
        raise ValueError(f"text {too_long + 1} of {rows} has {len(split.texts[too_long]):,} characters; the limit "
                         f"is {MAX_CHARS:,} (the model reads only its first {ckpt.config.max_len} tokens: cut it)")
    return dataset_name, split, rows


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
    from .adaptivity import adaptivity, load_reference  # pandas / scipy: keeps `predict` start-up light

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


def cmd_predict(args: argparse.Namespace) -> int:
    ckpt = open_model(args)
    control = Control(budget=args.budget) if args.budget is not None else None
    if control and ckpt.config.variant == "dense":
        raise ValueError("a dense checkpoint has no budget: --budget needs a budgetformer model" + no_budget(ckpt))
    if args.text:
        check_texts(list(args.text))
    elif not args.input_file:
        raise ValueError("no input: give TEXT arguments or --input-file")
    inputs = ((None, t) for t in args.text)
    if args.input_file:
        inputs = itertools.chain(inputs, input_rows(args.input_file))
    errors = total = 0
    for p in predict_rows(ckpt, inputs, control):  # the batch page's rows too
        total += 1
        if p.error is not None:
            errors += 1
            print(dumps({"line": p.line, "error": p.error}) if args.json else f"{p.line}: error: {p.error}", flush=True)
        elif args.json:
            print(dumps({"line": p.line, **p.row} if p.line is not None else p.row, ensure_ascii=False), flush=True)
        else:
            confidence = max(p.row["probs"].values())
            print(f"{'' if p.line is None else f'{p.line}: '}{shown(p.row['label'])}\t{confidence:.3f}\t"
                  f"k={p.row['k']}\t{p.text[:60]!r}", flush=True)
    if not total:
        raise ValueError(f"{args.input_file} has no lines")
    if errors:
        print(f"budgetformer predict: {errors} of {total} inputs were not classified (see their rows)", file=sys.stderr)
        return 2
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain, top_tokens

    ckpt = open_model(args)
    variant = ckpt.config.variant
    if variant == "dense":
        raise ValueError("a dense checkpoint has no budget to explain: every layer runs all of its heads"
                         + no_budget(ckpt))
    if args.budget is not None and variant == "budgetformer":
        raise ValueError("--budget forces s on a budgetformer model, leaving nothing to explain; "
                         "it is the requested budget b of a bba model")
    if not args.text:
        raise ValueError("no input: give one or more TEXT arguments")
    check_texts(list(args.text))
    control = Control(budget=args.budget) if args.budget is not None else None
    for e in explain(ckpt, list(args.text), control):
        if args.json:
            print(dumps({"tokens": e.tokens, "budget_attribution": e.budget_attribution, "attributed": e.attributed,
                         "value": e.value, "budget": e.budget, "k": e.k, "selected_heads": e.selected_heads,
                         "span": e.span}, ensure_ascii=False))
            continue
        print(f"{e.text[:60]!r} ({len(e.tokens)} tokens; attributed: {e.attributed})")
        for layer, value in enumerate(e.value):
            raised, lowered = top_tokens(e, layer)
            fmt = lambda pairs: ", ".join(f"{t!r} {a:+.4f}" for t, a in pairs) or "none"  # noqa: E731
            print(f"  layer {layer}: {value:.4f}, k={e.k[layer]} | raised by {fmt(raised)} | lowered by {fmt(lowered)}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import build_report

    ckpt = load_checkpoint(args.checkpoint)
    control = Control(budget=args.budget) if args.budget is not None else None
    page = build_report(ckpt, args.text, control)
    out = Path(args.out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder: give the HTML file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB; opens offline in a browser)")
    return 0


def bench_model(args: argparse.Namespace) -> tuple[BudgetFormer, str]:
    """The model to benchmark and where it came from: a checkpoint, or a fresh random model
    of the default shape changed by ``--set`` (its weights do not matter for speed)."""
    if args.checkpoint:
        if args.set:
            raise ValueError("--set changes the shape of a fresh model; a checkpoint has its own shape")
        ckpt = open_model(args)
        if ckpt.config.variant == "dense":
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

    from .precompute import CHECK_MODELS, CHECK_TOLERANCE, OUT, RECIPES, ROOT, agrees, live_check

    unknown = sorted(set(args.datasets) - set(RECIPES))
    if unknown:
        raise ValueError(f"unknown dataset {', '.join(unknown)}; choose from {', '.join(RECIPES)}")
    path = ROOT / OUT / "results" / "sweeps.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not there: build precomputed/ first (make precompute)")
    frame = pd.read_csv(path, dtype={"budget": str})
    if "dense_latency_ms" not in frame.columns:
        raise ValueError("sweeps.csv has no dense_latency_ms column: re-time it "
                         "(python -m budgetformer_core.precompute --retime)")
    absent = [d for d in args.datasets if RECIPES[d].data_dir and not (ROOT / RECIPES[d].data_dir).is_dir()]
    if absent:
        raise FileNotFoundError(f"the test texts of {', '.join(absent)} are not on this machine "
                                f"({', '.join(RECIPES[d].data_dir for d in absent)})")
    check = live_check(frame, args.datasets, args.models or list(CHECK_MODELS))
    check["agrees"] = agrees(check)
    if args.json:
        Path(args.json).write_text(dumps({"tolerance": CHECK_TOLERANCE, "rows": check.to_dict("records")}) + "\n")
    shown_columns = {"dataset": "dataset", "model": "model", "budget": "budget", "latency_ms": "shipped ms",
                     "latency_ms_live": "live ms", "speedup_b1": "shipped ×dense", "speedup_b1_live": "live ×dense",
                     "ratio": "live/shipped", "speedup_b32": "shipped ×dense b32",
                     "speedup_b32_live": "live ×dense b32", "agrees": f"within {CHECK_TOLERANCE:.0%}"}
    print(check[list(shown_columns)].rename(columns=shown_columns).round(3).to_string(index=False))
    off = check[~check["agrees"]]
    print(f"{len(check) - len(off)} of {len(check)} live speed-ups (batch 1, against the dense model timed in "
          f"the same rounds) within {CHECK_TOLERANCE:.0%} of sweeps.csv")
    return 1 if len(off) else 0


def _budget(value: str) -> float:
    b = float(value)
    if not 0.0 < b <= 1.0:
        raise argparse.ArgumentTypeError(f"budget must be in (0, 1], got {value}")
    return b


def _budgets(value: str) -> tuple[float, ...]:
    try:
        return tuple(_budget(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"budgets must be comma-separated numbers in (0, 1], got {value}") from None


def _lengths(value: str) -> list[int]:
    try:
        return [_positive(v) for v in value.split(",")]
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"lengths must be comma-separated positive integers, got {value}") from None


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return n


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return n


def add_split_arguments(p: argparse.ArgumentParser) -> None:
    """The options :func:`checkpoint_split` reads."""
    p.add_argument("--dataset", help="default: the dataset the checkpoint was trained on")
    p.add_argument("--data-dir", help="local copy of the dataset (e.g. ../shared/data/ag_news)")
    p.add_argument("--split", choices=("train", "validation", "test", "all"),
                   help="default: test; all = every labelled row, no split made (the default for a single file)")
    p.add_argument("--split-seed", type=_non_negative, help="default: the seed the checkpoint was trained with")
    p.add_argument("--limit", type=_positive, help="use only the first N rows")


CHECKPOINT_HELP = ("a checkpoint folder, a shipped model's name (budgetformer models lists them), or a Hugging Face "
                   "BERT-family sequence classifier's folder (config.json with id2label, model.safetensors, "
                   "tokenizer.json or vocab.txt)")


def add_rank_file(p: argparse.ArgumentParser) -> None:
    """``--rank-file``, which :func:`open_model` reads."""
    p.add_argument("--rank-file", metavar="F", help="a Hugging Face classifier: rank its heads on F (CSV / JSONL / "
                   "Parquet with text and label columns, labels as its id2label names or integers; or texts alone, "
                   "labelled by its own predictions) so that it takes budgets")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="budgetformer", description=__doc__.split("\n")[0],
                                     epilog="A checkpoint is a folder or the name of a shipped model "
                                            "(budgetformer models lists them).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("models", help="list the shipped models: dataset, method, test accuracy, heads run")
    p.add_argument("--json", action="store_true", help="print one JSON list")

    p = sub.add_parser("train", help="train a model and write a checkpoint")
    p.add_argument("--dataset", help="bbc, synthetic, synthetic_var, a hub name (ag_news, …) or a file (required)")
    p.add_argument("--data-dir", help="local copy of the dataset (e.g. ../shared/data/ag_news)")
    p.add_argument("--variant", choices=("dense", "budgetformer", "bba"), default="budgetformer",
                   help="dense: every head; budgetformer: f_θ / g_φ choose the heads per input; "
                        "bba: a requested budget b gates nested head sets (default: budgetformer)")
    p.add_argument("--init", help="warm start from this checkpoint, a folder or a shipped model's name "
                                  "(e.g. a dense model, for bba)")
    p.add_argument("--backbone", metavar="NAME|DIR",
                   help="start from a pretrained encoder: minilm-l6 (shipped by a package), a Hugging Face BERT "
                        "folder (config.json, model.safetensors, tokenizer.json or vocab.txt) or a hub model id "
                        "(e.g. prajjwal1/bert-mini: downloaded once into the Hugging Face cache, needs the network)")
    p.add_argument("--out", help="checkpoint directory to write (required); the run's state is kept in OUT.resume")
    p.add_argument("--force", action="store_true", help="replace a checkpoint already at --out")
    p.add_argument("--resume", metavar="DIR", help="continue the interrupted run whose state is in DIR (OUT.resume)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of ModelConfig or TrainConfig (repeatable; unknown keys are refused)")
    p.add_argument("--split-seed", type=_non_negative, default=0, help="seed of the train/validation/test split")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    p = sub.add_parser("eval", help="evaluate a checkpoint on a split")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_rank_file(p)
    add_split_arguments(p)
    p.add_argument("--budget", type=_budget, help="force s for every input and layer")
    p.add_argument("--ablation", choices=list(ABLATIONS), help="; ".join(f"{k}: {v}" for k, v in ABLATIONS.items()))
    p.add_argument("--mode", choices=("structural", "masked", "soft", "dense"),
                   help="execution mode (default: dense for a dense model, structural otherwise)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random head choice")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("adaptivity", help="how much the heads run follow the input's difficulty")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_rank_file(p)
    p.add_argument("--reference", help="model whose per-example loss is the difficulty, a folder or a shipped "
                   "model's name (default: <dataset>-dense beside the checkpoint; "
                   "<dataset>-minilm-dense for a model fine-tuned from MiniLM)")
    add_split_arguments(p)
    p.add_argument("--budget", type=_budget, help="force s (budgetformer) or request b (bba) for every input")
    p.add_argument("--ablation", choices=list(ABLATIONS), help="; ".join(f"{k}: {v}" for k, v in ABLATIONS.items()))
    p.add_argument("--seed", type=int, default=0, help="seed of the random head choice")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("prune", help="rank a dense model's heads (post-hoc baseline) into a bba checkpoint")
    p.add_argument("--checkpoint", required=True, help="a dense checkpoint: a folder or a shipped model's name")
    p.add_argument("--out", required=True, help="checkpoint directory to write")
    p.add_argument("--force", action="store_true", help="replace a checkpoint already at --out")
    p.add_argument("--dataset", help="default: the dataset the checkpoint was trained on")
    p.add_argument("--data-dir", help="local copy of the dataset (e.g. ../shared/data/ag_news)")
    p.add_argument("--split-seed", type=_non_negative, help="default: the seed the checkpoint was trained with")

    p = sub.add_parser("predict", help="classify texts and show the heads each one used")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_rank_file(p)
    p.add_argument("--budget", type=_budget, help="force s (budgetformer) or request b (bba) for every input")
    p.add_argument("--input-file", help="one text per line, or a CSV / JSONL file with a text column")
    p.add_argument("--json", action="store_true", help="one JSON object per input")
    p.add_argument("text", nargs="*", help="texts to classify")

    p = sub.add_parser("explain", help="which tokens raised or lowered each layer's budget s (bba: its gate margin)")
    p.add_argument("--checkpoint", required=True, help="a budgetformer or bba checkpoint: a folder or a shipped "
                                                        "model's name; or a Hugging Face classifier's folder with "
                                                        "--rank-file")
    add_rank_file(p)
    p.add_argument("--budget", type=_budget, help="bba: the requested budget b (default: the model's own)")
    p.add_argument("--json", action="store_true", help="one JSON object per input: tokens, budget_attribution, …")
    p.add_argument("text", nargs="*", help="texts to explain")

    p = sub.add_parser("report", help="one input's analysis as a self-contained HTML file that opens offline")
    p.add_argument("--checkpoint", required=True, help="a checkpoint folder or a shipped model's name")
    p.add_argument("--budget", type=_budget,
                   help="force s (budgetformer) or request b (bba); default: the model's own")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the HTML file to write")
    p.add_argument("text", help="the text to analyse (quote it)")

    p = sub.add_parser("bench", help="measure structural speed-up per budget against the FLOP ideal")
    p.add_argument("--checkpoint", help="a checkpoint, a folder or a shipped model's name, or a Hugging Face "
                                        "classifier's folder with --rank-file (default: a random model, see --set)")
    add_rank_file(p)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="shape of the random model")
    p.add_argument("--batch-size", type=_positive, default=1, help="inputs per forward pass (default: 1)")
    p.add_argument("--threads", type=_positive, default=1, help="torch threads (1: single-thread latency)")
    p.add_argument("--seq-len", type=_positive, help="tokens per input (default: the model's max_len)")
    p.add_argument("--seq-lens", type=_lengths, help="comma-separated lengths: one benchmark each, and the crossover")
    p.add_argument("--repeats", type=_positive, default=30, help="interleaved timing rounds")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls of each variant first")
    p.add_argument("--budgets", type=_budgets, default=BUDGETS, help="comma-separated budgets in (0, 1]")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and of a random model")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall: latency; cpu: the timing thread's CPU time (a busy machine's waits left out)")
    p.add_argument("--head-sets", choices=HEAD_SETS, default="input",
                   help="input: each input's heads ranked by its own scores (inputs that share a head set run "
                        "together); batch: one ranking per batch, by the scores averaged over its inputs, so at a "
                        "budget every input runs the same heads (faster; an input's heads then depend on its batch)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    p = sub.add_parser("latency-check", help="time shipped models again now and compare their speed-ups over "
                       "dense with sweeps.csv (exit 1 if any differs by more than 25 %%)")
    p.add_argument("--datasets", nargs="+", default=["bbc", "ag_news"],
                   help="datasets whose models to re-time (default: bbc ag_news)")
    p.add_argument("--models", nargs="+", help="models of each dataset, timed with its dense model "
                   "(default: budgetformer bba)")
    p.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "models": cmd_models,
    "train": cmd_train,
    "eval": cmd_eval,
    "adaptivity": cmd_adaptivity,
    "prune": cmd_prune,
    "predict": cmd_predict,
    "explain": cmd_explain,
    "report": cmd_report,
    "bench": cmd_bench,
    "latency-check": cmd_latency_check,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the checkpoints written
    try:
        return COMMANDS[args.command](resolve_checkpoints(args))
    except (ValueError, RuntimeError, FileNotFoundError) as e:
        print(f"budgetformer {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # train's says where it saved its state
        print(f"budgetformer {args.command}: interrupted{f': {e}' if str(e) else ''}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
