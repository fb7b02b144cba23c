"""The UI pieces shared by the pages (app/components.py): the one HTML table shows markup as
text and formats its numbers."""

from __future__ import annotations

from app import components


def test_html_table_shows_markup_as_text_and_formats_numbers():
    import pandas as pd

    frame = pd.DataFrame({"#": [3], "<i>mean</i> s": [0.12345], "text": ['<b>bold</b> & <script>x</script> "q"']})
    html = components.html_table(frame, {"#": "{:d}", "<i>mean</i> s": "{:.3f}"}, key="t")
    assert "<b>" not in html and "<script>" not in html and "<i>" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;" in html and "&lt;i&gt;mean&lt;/i&gt; s" in html
    assert '>0.123</td>' in html and '>3</td>' in html
    assert "#T_t td.col1" in html and "#T_t th.col1" in html  # the formatted columns are right-aligned
    assert "#T_t td.col2" not in html and "width: 50%" not in html
    assert "#T_t td.col2 {\n  width: 50%;" in components.html_table(frame, {}, key="t", wide="text")
