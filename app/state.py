"""Cached loading shared by the pages: models with cache_resource, tables with cache_data."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from budgetformer_core.checkpoint import Checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "precomputed" / "checkpoints"
DEFAULT_MODEL = "bbc-budgetformer"


def available_models() -> list[str]:
    """Checkpoint directories shipped under precomputed/checkpoints."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file())


@st.cache_resource(show_spinner="Loading model…")
def get_checkpoint(name: str) -> Checkpoint:
    """Load a shipped checkpoint once per server (read-only afterwards, so safe to share)."""
    return load_checkpoint(CHECKPOINTS / name)
