"""The budgetformer command: train, evaluate and explore models that run some of their attention heads.

A table of subcommands, each a thin wrapper of a core function:

    budgetformer models  (the shipped models: name, dataset, method, accuracy, heads run)
    budgetformer train   --dataset NAME --variant {dense,budgetformer,bba} --out DIR [--init DIR] [--set key=value ...]
                         [--backbone minilm-l6|DIR] [--force]   (or: budgetformer train --resume OUT.resume)
    budgetformer fit-budget --checkpoint DIR --dataset D|FILE --out ADAPTER [--method {budgetformer,bba}]
                         [--set key=value ...] [--force]
    budgetformer eval    --checkpoint DIR [--dataset D] [--split {test,...,all}] [--budget S] [--ablation A] [--json]
    budgetformer predict --checkpoint DIR [--budget S] [--json] (TEXT ... | --pair FIRST SECOND ... | --input-file F)
    budgetformer adaptivity --checkpoint DIR [--reference DIR] [--split test] [--budget S] [--json]
    budgetformer explain --checkpoint DIR [--budget B] [--json] (TEXT ... | --pair FIRST SECOND ...)
    budgetformer report  --checkpoint DIR [--budget B] [--head L H] --out FILE.html (TEXT | --pair FIRST SECOND)
    budgetformer export  --checkpoint DIR --out DIR [--force]   (a Hugging Face BERT classifier folder)
    budgetformer bench   (--checkpoint DIR | [--set key=value ...]) [--batch-size N] [--threads T]
                         [--seq-len L | --seq-lens L,L,...] [--repeats R] [--budgets B,B,...]
                         [--clock {wall,cpu}] [--head-sets {input,batch}] [--json]
    budgetformer latency-check [--datasets D ...] [--models M ...] [--data-dir DIR] [--json FILE]
    budgetformer analyze --checkpoint DIR [--dataset D|FILE] [--data-dir D] [--split S] [--budget B] --out DIR
                         [--engine local|ray] [--address ADDR] [--workers N] [--batch-size N]

Wherever a checkpoint is asked for (--checkpoint, --init, --reference), a folder or the name of
a shipped model (e.g. bbc-budgetformer) is accepted, from any working folder. ``--checkpoint``
also takes a Hugging Face BERT-family sequence classifier's folder
(:mod:`budgetformer_core.io.classifier`); ``--rank-file F`` ranks such a classifier's heads on F,
which gives it budgets without training; ``fit-budget`` fits per-input budgets on such a frozen model
(or one of ours) and writes an adapter, which opens wherever a checkpoint does.

Errors the user can fix (unknown key, bad checkpoint, empty text, a label the checkpoint does
not know, an existing checkpoint at --out without --force) print one line to stderr and exit
with status 2; no traceback. Ctrl-C prints one line and exits with 130 (train saves its
state first and says how to resume). JSON output writes null for NaN.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from ..shipped import resolve_checkpoints
from .commands import (
    cmd_adaptivity,
    cmd_analyze,
    cmd_bench,
    cmd_eval,
    cmd_explain,
    cmd_export,
    cmd_fit_budget,
    cmd_latency_check,
    cmd_models,
    cmd_predict,
    cmd_prune,
    cmd_report,
    cmd_train,
)
from .parser import build_parser

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "models": cmd_models,
    "train": cmd_train,
    "fit-budget": cmd_fit_budget,
    "eval": cmd_eval,
    "adaptivity": cmd_adaptivity,
    "prune": cmd_prune,
    "export": cmd_export,
    "predict": cmd_predict,
    "explain": cmd_explain,
    "report": cmd_report,
    "bench": cmd_bench,
    "latency-check": cmd_latency_check,
    "analyze": cmd_analyze,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the checkpoints written
    try:
        return COMMANDS[args.command](resolve_checkpoints(args))
    except BrokenPipeError:  # the reader stopped early (`budgetformer models | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the flush at exit does not fail again
        return 0
    except OSError as e:  # a full disk, a path under a file, /proc: the reason, in one line
        where = f"{e.filename}: " if e.filename else ""
        print(one_line(f"budgetformer {args.command}: error: {where}{e.strerror or e}"), file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as e:
        print(one_line(f"budgetformer {args.command}: error: {e}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # train's says where it saved its state
        print(f"budgetformer {args.command}: interrupted{f': {e}' if str(e) else ''}", file=sys.stderr)
        return 130


def one_line(message: str) -> str:
    """``message`` with every control character escaped (a path holding a newline or a terminal
    escape prints as ``\\n`` or ``\\x1b``): one line, and nothing that drives the terminal."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in message)
