"""The pieces of every figure: one look for each variant, tile, backend and meaning
(``style``), and bars for results of one size (``bars``). ``xbackend.figures.plots`` draws the
run folder's figures with them; ``xbackend.report`` its own."""
