"""Pure chart functions: data in, plotly figure out (no Streamlit calls here), a module per page:
:mod:`~app.charts.explore`, :mod:`~app.charts.heads` (the layers × heads maps of Explore, Side by
side and Easy vs hard), :mod:`~app.charts.dynamics`, :mod:`~app.charts.errors` (Errors and Batch),
:mod:`~app.charts.easy_hard`, :mod:`~app.charts.sweep` (Budget sweep and Ablations) and
:mod:`~app.charts.atlas`; :mod:`~app.charts.style` holds what they share.

Sized for a projector: large fonts, few colours, the thing to look at in the title. Only
numbers and names from the checkpoint go into the figures, never user text — except the tokens
that label a head's attention map (:func:`app.charts.explore.attention_heatmap`). Tokens and class names pass
through :func:`app.charts.style.plotly_text`, so that plotly shows them as the text they are (plotly renders some
HTML in labels: a class name ``<b>x</b>`` would be bold, ``<a href=…>`` a live link).

Each figure is built by one ``go.Figure(data=..., layout=...)`` call from plain dicts: plotly's
``update_*`` methods validate and dispatch on every call and cost several milliseconds per
figure, which matters when the page redraws on every slider step.
"""
