"""The ``budgetformer`` command's arguments: every subcommand and option, with its help line
(:mod:`budgetformer_core.cli` runs them; :mod:`budgetformer_core.cli.commands` holds what each does)."""

from __future__ import annotations

import argparse

from .. import __version__
from ..measure.bench import BUDGETS
from ..model.budget import ABLATIONS, HEAD_SETS

DESCRIPTION = "The budgetformer command: train, evaluate and explore models that run some of their attention heads."


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


SEED_MAX = 2**32 - 1
"""The largest seed every generator takes (numpy's and scikit-learn's are 32-bit)."""


def _seed(value: str) -> int:
    n = int(value)
    if not 0 <= n <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {SEED_MAX}, got {value}")
    return n


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return n


def add_split_arguments(p: argparse.ArgumentParser) -> None:
    """The options :func:`~budgetformer_core.cli.commands.checkpoint_split` reads."""
    p.add_argument("--dataset", help="default: the dataset the checkpoint was trained on")
    p.add_argument("--data-dir", help="folder holding a local copy of the dataset (e.g. data/ag_news)")
    p.add_argument("--split", choices=("train", "validation", "test", "all"),
                   help="default: test; all = every labelled row, no split made (the default for a single file)")
    p.add_argument("--split-seed", type=_seed, help="default: the seed the checkpoint was trained with")
    p.add_argument("--limit", type=_positive, help="use only the first N rows")


CHECKPOINT_HELP = ("a checkpoint folder, a shipped model's name (budgetformer models lists them), or a Hugging Face "
                   "BERT-family sequence classifier's folder (config.json with id2label, model.safetensors, "
                   "tokenizer.json or vocab.txt)")


def add_rank_file(p: argparse.ArgumentParser) -> None:
    """``--rank-file``, which :func:`~budgetformer_core.cli.commands.open_model` reads."""
    p.add_argument("--rank-file", metavar="F", help="a Hugging Face classifier: rank its heads on F (CSV / JSONL / "
                   "Parquet with text and label columns, labels as its id2label names or integers; or texts alone, "
                   "labelled by its own predictions) so that it takes budgets")


def add_pair(p: argparse.ArgumentParser, repeat: bool) -> None:
    """``--pair FIRST SECOND``: two texts read together, for a model trained on pairs or a Hugging
    Face classifier; ``repeat``: as many pairs as given (else one, instead of TEXT)."""
    p.add_argument("--pair", nargs=2, action="append" if repeat else "store", metavar=("FIRST", "SECOND"),
                   help="a pair of texts read together" + (" (repeatable)" if repeat else ", instead of TEXT")
                   + ", for a model trained on pairs or a Hugging Face classifier")


def add_export(sub: argparse._SubParsersAction) -> None:
    """The ``export`` subcommand (:func:`~budgetformer_core.cli.commands.cmd_export`)."""
    p = sub.add_parser("export", help="write a model as a Hugging Face BERT sequence classifier folder "
                       "(transformers' AutoModelForSequenceClassification and AutoTokenizer read it)")
    p.add_argument("--checkpoint", required=True, help="a post-norm (BERT-shaped) model: a checkpoint folder, a "
                   "shipped model's name (e.g. bbc-minilm-dense) or a Hugging Face classifier's folder; a budgeted "
                   "model is exported as its dense base")
    p.add_argument("--out", required=True, help="the folder to write (not inside a model folder)")
    p.add_argument("--force", action="store_true", help="replace an earlier export at --out")


def add_analyze(sub: argparse._SubParsersAction) -> None:
    """The ``analyze`` subcommand (:func:`~budgetformer_core.cli.commands.cmd_analyze`)."""
    p = sub.add_parser("analyze", help="the per-example allocation records of a whole corpus (prediction, loss, s, k "
                       "and the heads run per layer) as Parquet shards plus summary.json, on this machine or a Ray "
                       "cluster",
                       description="--dataset takes a dataset's name (with --data-dir and --split) or a file: CSV, "
                       "JSONL or Parquet with a text column (two for a model of pairs) and, if known, a label column, "
                       "or a text per line; a file is read whole. Rows without a label get no loss.")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_split_arguments(p)  # --dataset: a dataset's name, or a CSV / JSONL / Parquet file (labels optional)
    p.add_argument("--budget", type=_budget, help="force s (budgetformer) or request b (bba) for every input")
    p.add_argument("--out", required=True, help="the analysis folder to write: new or empty, or an interrupted "
                   "local run's folder to resume")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this process, resumable by shard (default); ray: Ray Data, one model per actor")
    p.add_argument("--address", help="ray: the cluster to join (auto: the one this machine belongs to); default: "
                   "start a local Ray with --workers CPUs")
    p.add_argument("--workers", type=_positive, help="local: torch threads; ray: actors, each one model on one "
                   "CPU (default: every CPU)")
    p.add_argument("--batch-size", type=_positive, default=1024, help="rows per batch, and per shard of a local "
                   "run (default: 1024)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="budgetformer", description=DESCRIPTION,
                                     epilog="A checkpoint is a folder or the name of a shipped model "
                                            "(budgetformer models lists them).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("models", help="list the shipped models: dataset, method, test accuracy, heads run")
    p.add_argument("--json", action="store_true", help="print one JSON list")

    p = sub.add_parser("train", help="train a model and write a checkpoint")
    p.add_argument("--dataset", help="bbc, synthetic, synthetic_var, synthetic_pairs, a hub name (ag_news, …) or a "
                                     "file (required; two text columns such as premise, hypothesis: a pair task)")
    p.add_argument("--data-dir", help="folder holding a local copy of the dataset (e.g. data/ag_news)")
    p.add_argument("--variant", dest="method", choices=("dense", "budgetformer", "bba"), default="budgetformer",
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
    p.add_argument("--split-seed", type=_seed, default=0, help="seed of the train/validation/test split")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    p = sub.add_parser("fit-budget", help="per-input budgets on a frozen model: fit only the allocation networks "
                       "(f_θ and g_φ per layer, or bba's gates) and write them as a small adapter")
    p.add_argument("--checkpoint", required=True, help="the frozen base: a dense checkpoint folder, a shipped dense "
                   "model's name, or a Hugging Face BERT-family sequence classifier's folder")
    p.add_argument("--dataset", required=True, help="a dataset name (its train split; validation and test measured) "
                   "or a file: CSV / JSONL / Parquet with a text column and, if known, a label column (labels as "
                   "the base's class names or integers), or a text per line")
    p.add_argument("--data-dir", help="folder holding a local copy of the dataset (e.g. data/ag_news)")
    p.add_argument("--split-seed", type=_seed, help="default: the seed the base was trained with (else 0)")
    p.add_argument("--method", choices=("budgetformer", "bba"), default="budgetformer",
                   help="budgetformer: f_θ and g_φ per layer choose each input's heads; bba: gates give nested head "
                        "sets at a requested budget (default: budgetformer)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a setting of the fit: TrainConfig's (lr, epochs, s_min, lambda_difficulty, …), "
                        "the allocation networks' (budget_hidden, summary_norm, …), temperature, label_weight")
    p.add_argument("--out", required=True, help="the adapter folder to write")
    p.add_argument("--force", action="store_true", help="replace an adapter already at --out")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    p = sub.add_parser("eval", help="evaluate a checkpoint on a split")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_rank_file(p)
    add_split_arguments(p)
    p.add_argument("--budget", type=_budget, help="force s for every input and layer")
    p.add_argument("--ablation", choices=list(ABLATIONS), help="; ".join(f"{k}: {v}" for k, v in ABLATIONS.items()))
    p.add_argument("--mode", choices=("structural", "masked", "soft", "dense"),
                   help="execution mode (default: dense for a dense model, structural otherwise)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the random head choice")
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
    p.add_argument("--seed", type=_seed, default=0, help="seed of the random head choice")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("prune", help="rank a dense model's heads (post-hoc baseline) into a bba checkpoint")
    p.add_argument("--checkpoint", required=True, help="a dense checkpoint: a folder or a shipped model's name")
    p.add_argument("--out", required=True, help="checkpoint directory to write")
    p.add_argument("--force", action="store_true", help="replace a checkpoint already at --out")
    p.add_argument("--dataset", help="default: the dataset the checkpoint was trained on")
    p.add_argument("--data-dir", help="folder holding a local copy of the dataset (e.g. data/ag_news)")
    p.add_argument("--split-seed", type=_seed, help="default: the seed the checkpoint was trained with")

    add_export(sub)
    add_analyze(sub)

    p = sub.add_parser("predict", help="classify texts and show the heads each one used")
    p.add_argument("--checkpoint", required=True, help=CHECKPOINT_HELP)
    add_rank_file(p)
    p.add_argument("--budget", type=_budget, help="force s (budgetformer) or request b (bba) for every input")
    p.add_argument("--input-file", help="one text per line, or a CSV / JSONL file with a text column, or two "
                                        "(premise, hypothesis; sentence1, sentence2; …): a pair per row")
    add_pair(p, repeat=True)
    p.add_argument("--json", action="store_true", help="one JSON object per input (a pair's: text and text_pair)")
    p.add_argument("text", nargs="*", help="texts to classify")

    p = sub.add_parser("explain", help="which tokens raised or lowered each layer's budget s (bba: its gate margin)")
    p.add_argument("--checkpoint", required=True, help="a budgetformer or bba checkpoint: a folder or a shipped "
                                                        "model's name; or a Hugging Face classifier's folder with "
                                                        "--rank-file")
    add_rank_file(p)
    p.add_argument("--budget", type=_budget, help="bba: the requested budget b (default: the model's own)")
    add_pair(p, repeat=True)
    p.add_argument("--json", action="store_true", help="one JSON object per input: tokens, budget_attribution, "
                                                       "segments, … (a pair's: text and text_pair)")
    p.add_argument("text", nargs="*", help="texts to explain")

    p = sub.add_parser("report", help="one input's analysis as a self-contained HTML file that opens offline")
    p.add_argument("--checkpoint", required=True, help="a checkpoint folder or a shipped model's name")
    p.add_argument("--budget", type=_budget,
                   help="force s (budgetformer) or request b (bba); default: the model's own")
    p.add_argument("--out", required=True, metavar="FILE.html", help="the HTML file to write")
    p.add_argument("--force", action="store_true", help="replace FILE.html if it exists")
    p.add_argument("--head", nargs=2, type=int, metavar=("LAYER", "HEAD"),
                   help="draw the attention of this head on the text (a head that did not run has none)")
    p.add_argument("--reference", help="the dense model the latency is timed beside (a folder or a shipped model's "
                   "name; default: the checkpoint's dense reference, when it is a shipped model)")
    p.add_argument("--no-timing", action="store_true", help="leave the latency out (timing takes a few seconds)")
    add_pair(p, repeat=False)
    p.add_argument("text", nargs="?", help="the text to analyse (quote it), or --pair FIRST SECOND")

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
    p.add_argument("--seed", type=_seed, default=0, help="seed of the inputs and of a random model")
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
    p.add_argument("--data-dir", help="local copy of the hub datasets among --datasets (e.g. ag_news): a "
                   "dataset's folder, or the folder holding one folder per dataset")
    p.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    return parser
