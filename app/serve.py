"""Start the app's Streamlit server with torch and the engine already imported.

``make run`` uses this instead of ``streamlit run`` so that importing PyTorch (1–2 s) happens
while the server starts, not during the first page load. Arguments are those of
``streamlit run`` after the script, e.g. ``python app/serve.py --server.port 8502``.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402, F401  (the slow import, paid before the server is up)
from streamlit.web import cli  # noqa: E402

import app.analysis  # noqa: E402, F401
import app.charts  # noqa: E402, F401
import budgetformer_core.checkpoint  # noqa: E402, F401
import budgetformer_core.infer  # noqa: E402, F401
import budgetformer_core.timing  # noqa: E402, F401

if __name__ == "__main__":
    sys.argv = ["streamlit", "run", str(ROOT / "app" / "main.py"), *sys.argv[1:]]
    sys.exit(cli.main())
