"""BudgetFormer Explorer — router only: page config, sidebar pickers, navigation."""

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `streamlit run app/main.py` from anywhere

st.set_page_config(page_title="BudgetFormer Explorer", page_icon="🧠", layout="wide")

pages = [
    st.Page("views/explore.py", title="Explore an input", icon="🔎", default=True),
]
st.navigation(pages).run()
