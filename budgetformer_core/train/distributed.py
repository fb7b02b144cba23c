"""Training on several processes: PyTorch DDP, launched by ``torchrun``.

``torchrun`` starts one process per worker and describes the group in the environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``); :func:`process_group` joins it
(gloo on CPU, nccl on GPU) and leaves it. Without torchrun every helper here is the identity of a
single process, so a plain run is exactly what it was.

How a run of W processes stays the run of one (same global batch): every process draws the same
batch order and the same augmentation (the same seeded streams, the whole batch augmented on
every rank), then computes only its own rows of each batch (:func:`shard`: positions rank,
rank + W, …), weighting its mean loss so that DDP's average of the W gradients is the gradient
of the global batch's mean loss (exactly so for every loss term that is a mean over rows;
``lambda_balance`` and ``lambda_difficulty`` look at the batch as a whole and see the rank's
rows, and dropout masks differ: close, not equal). Head choice under top-k: the heads a rank did not run get zero
rows of gradient (their weights are gathered, not skipped), which DDP averages as one process
would sum them; a weight that some rank did not use at all in a step gets no gradient there, and
DDP runs with ``find_unused_parameters`` so that such a step still reduces (the others' gradient
is averaged with none) and a weight no rank used keeps no gradient, as in one process (AdamW
then leaves it alone). Today's allocators use every weight in every step (PyTorch says so once
per rank). Only rank 0 writes files and prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from tokenizers import Tokenizer
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def world_size() -> int:
    """The number of processes training together (1 without torchrun)."""
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    """This process's rank in ``0 .. world_size() - 1`` (0 without torchrun)."""
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    """True on the process that writes files and prints (rank 0)."""
    return rank() == 0


def launched() -> bool:
    """True when torchrun started this process as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@contextmanager
def process_group() -> Iterator[None]:
    """Join the process group that torchrun set up for this process, for the ``with`` block.

    gloo on CPU, nccl on GPU (each process on the GPU of its ``LOCAL_RANK``; more processes on a
    machine than GPUs is refused). Does nothing when this process was not started by torchrun,
    or a group is already set up (by the caller).
    """
    if not launched() or dist.is_initialized():
        yield
        return
    if torch.cuda.is_available():
        local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
        if local >= gpus:
            raise ValueError(f"process {local} on this machine has no GPU of its own ({gpus} here): start at most "
                             f"{gpus} per machine (--nproc_per_node), or train on CPU (CUDA_VISIBLE_DEVICES=)")
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()


def _device() -> torch.device:
    """Where collective tensors live: the process's GPU under nccl, else the CPU."""
    return torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")


def shard(n: int) -> tuple[list[int], float]:
    """This process's share of a global batch of ``n`` rows, and the weight on its mean loss.

    Returns:
        The positions in the batch this rank computes (rank, rank + W, …; the ranks' positions
        are disjoint and cover the batch), and n_rank · W / n: with it, DDP's mean of the
        ranks' gradients is the gradient of the mean loss over all ``n`` rows. One process:
        every position, weight 1.
    """
    w = world_size()
    mine = list(range(rank(), n, w))
    return mine, len(mine) * w / n


def check_batches(n_rows: int, batch_size: int) -> None:
    """Refuse, before training, batches too small to give every process a row."""
    smallest = min(batch_size, n_rows % batch_size or batch_size)  # the last batch may be short
    if smallest < world_size():
        rows = f"{smallest} row{'s' if smallest > 1 else ''}"
        raise ValueError(f"a batch of {rows} cannot be shared by {world_size()} processes: choose batch_size (and "
                         f"max_train) so that every batch, an epoch's last too, holds at least {world_size()} rows")


def wrap(model: nn.Module, seed: int) -> nn.Module:
    """``model`` as DDP when several processes train it (their copies start equal: DDP copies
    rank 0's weights), else ``model`` itself. Each rank's dropout is seeded ``seed + rank``."""
    if world_size() == 1:
        return model
    torch.manual_seed(seed + rank())  # one dropout stream per rank, each reproducible
    return DistributedDataParallel(model, find_unused_parameters=True)


def sum_over_ranks(values: dict[str, float] | torch.Tensor) -> dict[str, float] | torch.Tensor:
    """The sum over every process of a tensor, or of each number of a dict (types kept); the
    values themselves in one process."""
    if world_size() == 1:
        return values
    if isinstance(values, torch.Tensor):
        total = values.to(_device(), torch.float64)
        dist.all_reduce(total)
        return total.to(values.device, values.dtype)
    total = torch.tensor(list(values.values()), dtype=torch.float64, device=_device())
    dist.all_reduce(total)
    return {k: type(v)(x) for (k, v), x in zip(values.items(), total.tolist())}


def broadcast_text(text: str) -> str:
    """Rank 0's ``text`` on every process (as UTF-8 bytes in a tensor: nothing is unpickled)."""
    if world_size() == 1:
        return text
    data = text.encode() if is_main() else b""
    size = torch.tensor([len(data)], device=_device())
    dist.broadcast(size, src=0)
    buf = torch.tensor(list(data) if is_main() else [0] * int(size), dtype=torch.uint8, device=_device())
    dist.broadcast(buf, src=0)
    return buf.cpu().numpy().tobytes().decode()


def same_tokenizer(tok: Tokenizer) -> Tokenizer:
    """Rank 0's tokenizer on every process (a WordPiece trainer can break ties differently in
    each process); ``tok`` itself in one process."""
    if world_size() == 1:
        return tok
    return Tokenizer.from_str(broadcast_text(tok.to_str()))
