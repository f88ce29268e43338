"""The notebook front: the magics (declarations), the one cell-run controller, autoheal, cell editing, the notebook context and export."""
