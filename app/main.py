"""BudgetFormer Explorer — router only: page config, sidebar pickers, navigation."""

import sys
import time
from pathlib import Path

import streamlit as st

# `streamlit run app/main.py` from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.components import model_picker  # noqa: E402  (needs the path above)
from app.state import prefetch  # noqa: E402

started = time.perf_counter()
# an emoji favicon is drawn in the browser; a :material/…: one is fetched from fonts.gstatic.com
st.set_page_config(page_title="BudgetFormer Explorer", page_icon="🧠", layout="wide")

pages = [
    st.Page("views/explore.py", title="Explore an input", icon=":material/search:", default=True),
    st.Page("views/sweep.py", title="Budget sweep", icon=":material/tune:"),
    st.Page("views/compare.py", title="Side by side", icon=":material/compare:"),
    st.Page("views/easy_hard.py", title="Easy vs hard", icon=":material/balance:"),
    st.Page("views/ablations.py", title="Ablations", icon=":material/science:"),
    st.Page("views/errors.py", title="Errors", icon=":material/error:"),
    st.Page("views/batch.py", title="Batch analysis", icon=":material/table_view:"),
    st.Page("views/atlas.py", title="Head atlas", icon=":material/grid_view:", url_path="atlas"),
    st.Page("views/dynamics.py", title="Training dynamics", icon=":material/show_chart:"),
]
page = st.navigation(pages)
name = model_picker()  # shared by every page: widgets in the entry script persist across pages
page.run()
if name is not None:
    prefetch(name)  # the picked model's per-example tables, read while the visitor looks at this page
# reached only when the page ran to the end (st.stop ends the run before this)
st.sidebar.caption(f"Server time for this update: {(time.perf_counter() - started) * 1e3:.0f} ms")
