"""Multi-head self-attention: executing a layer's allocation, three ways, and pruning heads once.

:meth:`HeadAttention.forward` runs a :class:`~budgetformer_core.model.allocators.LayerTrace` in one of the
execution modes — the one place a mode is dispatched:

* :meth:`HeadAttention.dense` — plain multi-head attention, every head weight 1 (the baseline).
* :meth:`HeadAttention.weighted` — every head computed, head i's output scaled by w_i before
  the output projection. This is the soft path used in training; with the unselected heads'
  weights set to zero it is the *masked* path (all the work, none of the saving).
* :meth:`HeadAttention.structural` — only the selected heads are computed: their rows of the
  Q/K/V projection and their columns of the output projection are gathered, so the work done is
  proportional to k. Inputs in one call may each select different heads (same k).

The fused projection ``qkv.weight`` has shape (3·H·Dh, D) (H·Dh = D unless the config gives
heads a width of their own, ``ModelConfig.head_dim``); head i owns rows
[i·Dh, (i+1)·Dh) of each of its Q, K and V blocks, and columns [i·Dh, (i+1)·Dh) of ``out.weight``.
Viewed as (3, H, Dh·D) and (D, H, Dh), a head's slices are one index along the H axis, so
gathering k heads is one ``index_select`` per weight, with no index arithmetic per call.

A ``key_mask`` of ``None`` means every position is a real token: attention then runs without a
mask, which the fused CPU kernel does faster (the model passes ``None`` for unpadded batches).

Asked to (an :class:`AttentionCapture` passed to :meth:`HeadAttention.forward`), the heads that
run also keep their attention probabilities: the same projections, computed as softmax(QKᵀ/√Dh)
written out instead of the fused kernel, so what is shown is what the path computed. Without a
capture nothing changes (the fused kernel, no extra work).

At inference on a CPU (float32, autograd off, no capture) each of the three runs in one compiled
call, :func:`~budgetformer_core.model.native.attend`: the chosen heads' rows and columns are read
where they lie, with no gather and no Python between the products (:meth:`HeadAttention._compiled`);
``native.eager()`` switches it off, and it gives the eager path's outputs to float32 rounding.
On the structural path the allocation and the attention can be that one call
(:meth:`HeadAttention.allocate_attend`, which the allocator makes through ``Allocator.run``).

A fixed head set (a post-hoc pruned model, a fixed-budget specialist) is not gathered on every
call: :meth:`HeadAttention.prune_heads` slices the weights once, as Hugging Face BERT's
``prune_heads`` does, and the layer is then a plain attention layer with fewer heads.

Head weights that are exactly 1 on the heads that run (``LayerTrace.unit_weights``: the adaptive
recipe and bba at inference) are not multiplied in, and all H heads at unit weight run as
:meth:`dense`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import native
from .trace import LayerTrace

MODES = ("dense", "soft", "masked", "structural")


@dataclass
class AttentionCapture:
    """Where one layer's call writes the attention probabilities of the heads it computes."""

    probs: Tensor
    """(B, H, T, T) by head index: row q of head h is query q's attention over the keys. NaN
    for the heads that were not computed."""

    @classmethod
    def empty(cls, batch: int, n_heads: int, seq_len: int, like: Tensor) -> AttentionCapture:
        """Nothing computed yet: every entry NaN (dtype and device of ``like``)."""
        return cls(like.new_full((batch, n_heads, seq_len, seq_len), float("nan")))

    def write(self, heads: Tensor, probs: Tensor) -> None:
        """Keep ``probs`` (B, n, T, T), the attention of heads ``heads`` (B, n) of each input."""
        index = heads[:, :, None, None].expand_as(probs)  # (B, n, T, T)
        self.probs.scatter_(1, index, probs.to(self.probs.dtype))

    def rows(self, rows: Tensor) -> AttentionCapture:
        """A capture for the inputs ``rows`` of the batch (a copy: :meth:`put` writes it back)."""
        return AttentionCapture(self.probs[rows])

    def put(self, rows: Tensor, part: AttentionCapture) -> None:
        self.probs[rows] = part.probs


class HeadAttention(nn.Module):
    """Self-attention whose heads can be weighted, masked or structurally skipped."""

    def __init__(self, d_model: int, n_heads: int, kept: list[int] | None = None, d_head: int = 0):
        """``kept``: build the layer already pruned to these of its ``n_heads`` heads (to load a
        pruned checkpoint); :meth:`prune_heads` prunes a built one. ``d_head``: each head's width
        (0 = ``d_model / n_heads``)."""
        super().__init__()
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_head or d_model // n_heads
        width = n_heads * self.d_head
        self.qkv = nn.Linear(d_model, 3 * width)
        self.out = nn.Linear(width, d_model)
        if kept is not None:
            self.prune_heads(kept)

    def prune_heads(self, keep: list[int]) -> None:
        """Keep only heads ``keep`` (indices among the current heads), slicing the weights once:
        Q/K/V rows and output-projection columns of the other heads are dropped for good."""
        keep = sorted(set(keep))
        if not keep or keep[0] < 0 or keep[-1] >= self.n_heads:
            raise ValueError(f"heads to keep must be among 0..{self.n_heads - 1}, got {keep}")
        w_qkv, b_qkv, w_out = (t.detach().clone() for t in self.head_slices(torch.tensor(keep)))
        b_out = self.out.bias.detach().clone()
        n = len(keep) * self.d_head
        self.qkv = nn.Linear(self.d_model, 3 * n)
        self.out = nn.Linear(n, self.d_model)
        with torch.no_grad():
            self.qkv.weight.copy_(w_qkv)  # (3·k·Dh, D)
            self.qkv.bias.copy_(b_qkv)
            self.out.weight.copy_(w_out)  # (D, k·Dh)
            self.out.bias.copy_(b_out)
        self.n_heads = len(keep)

    def forward(
        self, x: Tensor, key_mask: Tensor | None, trace: LayerTrace, mode: str,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        """Run the trace's heads on x (B, T, D) in ``mode`` (one of :data:`MODES`); with
        ``capture``, the computed heads' attention is written into it (by original head index)."""
        if trace.every_head or mode == "dense":
            # the heads run in index order: all of them, or a pruned layer's kept ones
            heads = trace.selected.nonzero()[:, 1].view(x.shape[0], self.n_heads) if capture else None  # (B, H')
            return self.dense(x, key_mask, capture, heads)
        if mode == "soft":
            return self.weighted(x, key_mask, trace.head_weights, capture)
        if mode == "masked":
            return self.weighted(x, key_mask, trace.head_weights * trace.selected, capture)
        w = None if trace.unit_weights else trace.head_weights
        if trace.shared_k is not None:  # the batch's k known as a number: k and selected not read
            return self._run_group(x, key_mask, trace.order, w, trace.shared_k, capture)
        return self.run_selected(x, key_mask, trace.order, trace.k, w, capture)

    def run_selected(
        self, x: Tensor, key_mask: Tensor | None, order: Tensor, k: Tensor, w: Tensor | None,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        """The structural path for a batch whose inputs may run different numbers of heads.

        One call when the batch shares k (always at batch size 1); otherwise one call per
        distinct k — at most H groups, never a loop over heads. order, w: (B, H), w None for
        unit weights; k: (B,).
        """
        if k.shape[0] == 1 or bool((k == k[0]).all()):
            return self._run_group(x, key_mask, order, w, int(k[0]), capture)
        out = torch.empty_like(x)
        for kg in k.unique().tolist():
            rows = (k == kg).nonzero().squeeze(1)
            group_mask = None if key_mask is None else key_mask[rows]
            part = None if capture is None else capture.rows(rows)
            out[rows] = self._run_group(x[rows], group_mask, order[rows], None if w is None else w[rows], kg, part)
            if part is not None:
                capture.put(rows, part)
        return out

    def _run_group(
        self, x: Tensor, key_mask: Tensor | None, order: Tensor, w: Tensor | None, k: int,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        idx = order[:, :k]  # (Bg, k) the k most relevant heads of each input
        return self.structural(x, key_mask, idx, None if w is None else w.gather(1, idx), capture)

    def _attend(
        self, qkv: Tensor, key_mask: Tensor | None, n: int,
        capture: AttentionCapture | None = None, heads: Tensor | None = None,
    ) -> Tensor:
        """Scaled dot-product attention of ``n`` heads packed in ``qkv``.

        Args:
            qkv: (B, T, 3·n·Dh) projected queries, keys and values.
            key_mask: (B, T) True for real tokens, or None when all are real.
            capture: where to write the heads' attention probabilities (then computed as
                softmax(QKᵀ/√Dh) written out, not by the fused kernel, which does not return them).
            heads: (B, n) the original index of each packed head (for ``capture``).

        Returns:
            (B, n, T, Dh) per-head outputs.
        """
        B, T, _ = qkv.shape
        q, k, v = qkv.view(B, T, 3, n, self.d_head).permute(2, 0, 3, 1, 4)  # 3 × (B, n, T, Dh)
        attn_mask = None if key_mask is None else key_mask[:, None, None, :]  # (B, 1, 1, T)
        if capture is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_head)  # (B, n, T, T) query × key
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        probs = scores.softmax(-1)  # (B, n, T, T), each query's row sums to 1 over real keys
        capture.write(heads, probs)
        return probs @ v  # (B, n, T, Dh)

    def _all_heads(self, x: Tensor) -> Tensor:
        """(B, H) the layer's heads in index order, for every input of x (B, T, D)."""
        return torch.arange(self.n_heads, device=x.device).expand(x.shape[0], -1)

    @staticmethod
    def _merge(heads: Tensor) -> Tensor:
        B, n, T, Dh = heads.shape
        # (B, n, T, Dh) -> (B, T, n·Dh); a free view when the kernel laid heads out (B, T, n, Dh)
        return heads.transpose(1, 2).reshape(B, T, n * Dh)

    def dense(
        self, x: Tensor, key_mask: Tensor | None, capture: AttentionCapture | None = None,
        heads: Tensor | None = None,
    ) -> Tensor:
        """Plain multi-head attention. x: (B, T, D) -> (B, T, D). ``heads`` (B, H'): the original
        indices of the layer's heads when it is pruned (for ``capture``; default 0 … H−1)."""
        if capture is None and (out := self._compiled(x, key_mask, None, None)) is not None:
            return out
        if capture is not None and heads is None:
            heads = self._all_heads(x)
        out = self._attend(self.qkv(x), key_mask, self.n_heads, capture, heads)
        return self.out(self._merge(out))

    def weighted(
        self, x: Tensor, key_mask: Tensor | None, head_weights: Tensor, capture: AttentionCapture | None = None
    ) -> Tensor:
        """All heads computed, head i scaled by head_weights[:, i] (B, H)."""
        if capture is None and (out := self._compiled(x, key_mask, None, head_weights)) is not None:
            return out
        all_heads = None if capture is None else self._all_heads(x)
        heads = self._attend(self.qkv(x), key_mask, self.n_heads, capture, all_heads)  # (B, H, T, Dh)
        heads = heads * head_weights.view(*head_weights.shape, 1, 1)  # (B, H, 1, 1) scales
        return self.out(self._merge(heads))

    def head_slices(self, heads: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The selected heads' Q/K/V weight rows and biases and output-projection columns.

        Args:
            heads: (k,) head indices shared by the whole batch, or (B, k) one set per input.

        Returns:
            ``(w_qkv, b_qkv, w_out)``: for (k,) indices (3·k·Dh, D), (3·k·Dh,), (D, k·Dh) — the
            weights of a k-head attention layer; for (B, k) indices the same with a leading
            batch axis, shaped for ``baddbmm``: (B, 3·k·Dh, D), (B, 1, 3·k·Dh), (B, k·Dh, D).
            Q, K and V rows come in that order, each in the order of ``heads``.
        """
        H, Dh, D = self.n_heads, self.d_head, self.d_model
        w_qkv = self.qkv.weight.view(3, H, Dh * D)  # Q/K/V block, head, the head's rows
        b_qkv = self.qkv.bias.view(3, H, Dh)
        w_out = self.out.weight.view(D, H, Dh)  # output row, head, the head's columns
        if heads.dim() == 1:
            n = 3 * heads.numel() * Dh
            return (
                w_qkv.index_select(1, heads).view(n, D),  # (3, k, Dh·D) -> (3·k·Dh, D)
                b_qkv.index_select(1, heads).view(n),
                w_out.index_select(1, heads).view(D, n // 3),  # (D, k, Dh) -> (D, k·Dh)
            )
        B, k = heads.shape
        blocks = torch.arange(0, 3 * H, H, device=heads.device)[:, None]  # (3, 1) Q, K, V offsets
        rows = (heads[:, None, :] + blocks).view(-1)  # (B·3·k,) rows of the (3·H, Dh·D) view
        n = 3 * k * Dh
        w_out = w_out.index_select(1, heads.reshape(-1))  # (D, B·k, Dh)
        return (
            w_qkv.view(3 * H, Dh * D).index_select(0, rows).view(B, n, D),  # (B, 3·k·Dh, D)
            b_qkv.view(3 * H, Dh).index_select(0, rows).view(B, 1, n),
            w_out.view(D, B, k * Dh).permute(1, 2, 0),  # (D, B, k·Dh) -> (B, k·Dh, D)
        )

    def structural(
        self, x: Tensor, key_mask: Tensor | None, selected: Tensor, weights: Tensor | None,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        """Compute only the selected heads.

        Args:
            x: (B, T, D) layer input (after layer norm).
            key_mask: (B, T) True for real tokens, or None when all are real.
            selected: (B, k) indices of the heads to run, the same k for every input.
            weights: (B, k) the selected heads' weights w, or None when they are all 1.
            capture: where to write the selected heads' attention (the others stay NaN).

        Returns:
            (B, T, D), equal to :meth:`weighted` with the other heads' weights set to zero.
        """
        B, k = selected.shape
        if capture is None and k < self.n_heads and (out := self._compiled(x, key_mask, selected, weights)) is not None:
            return out
        if k == self.n_heads:
            # every head runs: the layer's own weights, nothing to gather
            if weights is None:
                return self.dense(x, key_mask, capture)
            all_weights = weights.new_zeros(B, k).scatter_(1, selected, weights)  # (B, H) by head
            return self.weighted(x, key_mask, all_weights, capture)
        if B == 1 or bool((selected == selected[:1]).all()):
            return self._one_set(x, key_mask, selected, weights, capture)
        # the same set in any order is one set: each input's heads in index order
        selected, perm = selected.sort(dim=1)  # (B, k)
        weights = None if weights is None else weights.gather(1, perm)
        sets, group = torch.unique(selected, dim=0, return_inverse=True)  # (G, k) distinct sets, (B,)
        if sets.shape[0] <= B * self.GROUP_SHARE:
            return self._grouped(x, key_mask, selected, weights, group, sets.shape[0], capture)
        return self._per_input(x, key_mask, selected, weights, capture)

    def _params(self) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None]:
        """The fused projection's weight (3·H·Dh, D) and bias, the output projection's weight (D, H·Dh) and bias."""
        qkv, out = self.qkv, self.out
        return qkv.weight, qkv.bias, out.weight, out.bias

    def _compiled(self, x: Tensor, key_mask: Tensor | None, heads: Tensor | None, weights: Tensor | None
                  ) -> Tensor | None:
        """The attention of ``heads`` with ``weights`` (B, k) in one compiled call (:func:`native.attend`),
        or None where that call does not apply. ``heads``: (k,) shared by the batch, (B, k) one set
        per input (run as one shared set when every row holds the same heads), or None for every head."""
        params = self._params()
        if not native.attention_usable(x, params):
            return None
        heads = torch.arange(self.n_heads) if heads is None else heads
        return native.attend(x, key_mask, heads, weights, params, self.d_head)

    def allocate_attend(self, xa: Tensor, x: Tensor, key_mask: Tensor | None, packed: tuple, k: int,
                        scaled: bool = False, budget: float = 0.0
                        ) -> tuple[Tensor | None, Tensor, Tensor, Tensor | None, Tensor] | None:
        """A layer's compiled allocation (``packed``: the weights :func:`native.pack` lays out, read
        from ``xa``: packed only where the compiled allocation applies) and the structural attention
        of the heads it ranks first on x, in one call (:func:`native.allocate_attend`, whose outputs
        it returns); None where the compiled attention does not apply (then neither has run)."""
        params = self._params()
        if not native.attention_usable(x, params):
            return None
        return native.allocate_attend(xa, x, key_mask, *packed, k, params, self.d_head, scaled, budget)

    GROUP_SHARE = 0.5
    """Inputs are run group by group (one plain matmul per head set) when the batch has at most
    this many distinct head sets per input; with more, one batched matmul over per-input weight
    slices costs less than a call per set."""

    def _one_set(
        self, x: Tensor, key_mask: Tensor | None, selected: Tensor, weights: Tensor | None,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        """:meth:`structural` when every input runs the same heads (``selected[0]``): the weights
        are sliced once and the batch runs through plain matmuls, as a pruned layer would."""
        B, k = selected.shape
        w_qkv, b_qkv, w_out = self.head_slices(selected[0])
        heads = self._attend(F.linear(x, w_qkv, b_qkv), key_mask, k, capture, selected)  # (B, k, T, Dh)
        heads = heads if weights is None else heads * weights.view(B, k, 1, 1)
        return F.linear(self._merge(heads), w_out, self.out.bias)

    def _grouped(
        self, x: Tensor, key_mask: Tensor | None, selected: Tensor, weights: Tensor | None,
        group: Tensor, n_groups: int, capture: AttentionCapture | None = None,
    ) -> Tensor:
        """:meth:`structural` set by set: the inputs of ``group`` g (B,) share a head set and run
        together through :meth:`_one_set`. The batch is sorted by group once, so that each
        group's inputs, set and weights are a contiguous slice; each group's output is copied
        straight to its inputs' rows."""
        by_group = group.argsort(stable=True)  # (B,) inputs ordered by their set
        sizes = torch.bincount(group, minlength=n_groups).tolist()  # inputs per set
        parts = x.index_select(0, by_group).split(sizes)  # G × (Bg, T, D)
        masks = [None] * n_groups if key_mask is None else key_mask.index_select(0, by_group).split(sizes)
        sets = selected.index_select(0, by_group).split(sizes)  # G × (Bg, k)
        ws = [None] * n_groups if weights is None else weights.index_select(0, by_group).split(sizes)
        out = torch.empty_like(x)  # (B, T, D)
        for xg, mg, sg, wg, rows in zip(parts, masks, sets, ws, by_group.split(sizes), strict=True):
            part = None if capture is None else capture.rows(rows)
            out.index_copy_(0, rows, self._one_set(xg, mg, sg, wg, part))
            if part is not None:
                capture.put(rows, part)
        return out

    def _per_input(
        self, x: Tensor, key_mask: Tensor | None, selected: Tensor, weights: Tensor | None,
        capture: AttentionCapture | None = None,
    ) -> Tensor:
        """:meth:`structural` with a head set per input: per-input weight slices, batched matmuls."""
        B, k = selected.shape
        w_qkv, b_qkv, w_out = self.head_slices(selected)
        qkv = torch.baddbmm(b_qkv, x, w_qkv.transpose(1, 2))  # (B, T, 3·k·Dh)
        heads = self._attend(qkv, key_mask, k, capture, selected)  # (B, k, T, Dh)
        heads = heads if weights is None else heads * weights.view(B, k, 1, 1)
        return torch.baddbmm(self.out.bias, self._merge(heads), w_out)  # (B, T, D)
