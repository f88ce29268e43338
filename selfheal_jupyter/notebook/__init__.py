"""The notebook front: the magics (declarations), the one cell-run controller, the minimal fix it hands over, autoheal, cell editing, the notebook context and export."""
