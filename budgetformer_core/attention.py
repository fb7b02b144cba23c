"""Multi-head self-attention executed three ways.

* :meth:`HeadAttention.dense` — plain multi-head attention, every head weight 1 (the baseline).
* :meth:`HeadAttention.weighted` — every head computed, head i's output scaled by w_i before
  the output projection. This is the soft path used in training; with the unselected heads'
  weights set to zero it is the *masked* path (all the work, none of the saving).
* :meth:`HeadAttention.structural` — only the selected heads are computed: their rows of the
  Q/K/V projection and their columns of the output projection are gathered, so the work done is
  proportional to k. Inputs in one call may each select different heads (same k).

The fused projection ``qkv.weight`` has shape (3·D, D); head i owns rows
[i·Dh, (i+1)·Dh) of each of its Q, K and V blocks, and columns [i·Dh, (i+1)·Dh) of ``out.weight``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class HeadAttention(nn.Module):
    """Self-attention whose heads can be weighted, masked or structurally skipped."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def _attend(self, qkv: Tensor, key_mask: Tensor, n: int) -> Tensor:
        """Scaled dot-product attention of ``n`` heads packed in ``qkv``.

        Args:
            qkv: (B, T, 3·n·Dh) projected queries, keys and values.
            key_mask: (B, T) True for real tokens.

        Returns:
            (B, n, T, Dh) per-head outputs.
        """
        B, T, _ = qkv.shape
        q, k, v = qkv.view(B, T, 3, n, self.d_head).permute(2, 0, 3, 1, 4)  # 3 × (B, n, T, Dh)
        attn_mask = key_mask[:, None, None, :]  # (B, 1, 1, T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    def _merge(self, heads: Tensor) -> Tensor:
        B, n, T, Dh = heads.shape
        return heads.transpose(1, 2).reshape(B, T, n * Dh)  # (B, n, T, Dh) -> (B, T, n·Dh)

    def dense(self, x: Tensor, key_mask: Tensor) -> Tensor:
        """Plain multi-head attention. x: (B, T, D) -> (B, T, D)."""
        heads = self._attend(self.qkv(x), key_mask, self.n_heads)
        return self.out(self._merge(heads))

    def weighted(self, x: Tensor, key_mask: Tensor, head_weights: Tensor) -> Tensor:
        """All heads computed, head i scaled by head_weights[:, i] (B, H)."""
        heads = self._attend(self.qkv(x), key_mask, self.n_heads)  # (B, H, T, Dh)
        heads = heads * head_weights[:, :, None, None]
        return self.out(self._merge(heads))

    def head_rows(self, selected: Tensor) -> tuple[Tensor, Tensor]:
        """Row indices into qkv.weight and column indices into out.weight of selected heads.

        Args:
            selected: (B, k) head indices.

        Returns:
            ``(qkv_rows, out_cols)`` of shapes (B, 3·k·Dh) and (B, k·Dh).
        """
        B, k = selected.shape
        dev = selected.device
        offsets = torch.arange(self.d_head, device=dev)
        cols = (selected[:, :, None] * self.d_head + offsets).reshape(B, k * self.d_head)
        block = torch.arange(3, device=dev)[None, :, None] * self.d_model  # Q, K, V: (1, 3, 1)
        return (cols[:, None, :] + block).reshape(B, 3 * k * self.d_head), cols

    def structural(self, x: Tensor, key_mask: Tensor, selected: Tensor, weights: Tensor) -> Tensor:
        """Compute only the selected heads.

        Args:
            x: (B, T, D) layer input (after layer norm).
            key_mask: (B, T) True for real tokens.
            selected: (B, k) indices of the heads to run, the same k for every input.
            weights: (B, k) the selected heads' weights w.

        Returns:
            (B, T, D), equal to :meth:`weighted` with the other heads' weights set to zero.
        """
        B, k = selected.shape
        rows, cols = self.head_rows(selected)
        if B == 1 or bool((selected == selected[:1]).all()):
            # one head set for the whole batch: slice the weights once, plain matmuls
            qkv = F.linear(x, self.qkv.weight[rows[0]], self.qkv.bias[rows[0]])  # (B, T, 3·k·Dh)
            heads = self._attend(qkv, key_mask, k) * weights[:, :, None, None]  # (B, k, T, Dh)
            return F.linear(self._merge(heads), self.out.weight[:, cols[0]], self.out.bias)
        # a head set per input: gather per-input weight slices, batched matmuls
        w_qkv = self.qkv.weight[rows]  # (B, 3·k·Dh, D)
        qkv = torch.baddbmm(self.qkv.bias[rows][:, None, :], x, w_qkv.transpose(1, 2))  # (B, T, 3·k·Dh)
        heads = self._attend(qkv, key_mask, k) * weights[:, :, None, None]  # (B, k, T, Dh)
        w_out = self.out.weight[:, cols].permute(1, 2, 0)  # (D, B, k·Dh) -> (B, k·Dh, D)
        return torch.baddbmm(self.out.bias[None, None, :], self._merge(heads), w_out)
