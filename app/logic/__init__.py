"""What each page computes, as plain functions (no Streamlit here): a module per page of
``app/views/`` that has logic of its own, and the per-example tables several pages share."""
