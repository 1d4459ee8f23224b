"""The Streamlit browser (``witness ui``) and the pure helpers it draws with."""

from .render import COLORS, draw_boxes, failing_rows, load_image

__all__ = ["COLORS", "draw_boxes", "failing_rows", "load_image"]
