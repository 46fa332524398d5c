"""Helpers for the real-browser test: a scratch JupyterLab server and a Playwright page."""
