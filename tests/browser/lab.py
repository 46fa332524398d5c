"""A JupyterLab server on 127.0.0.1 with a token, a scratch HOME and this venv's kernel.

Nothing is written into the real home: HOME, the Jupyter config/data/runtime folders, the lab's
settings and workspaces and IPython's folder all live under the scratch directory, and deleting
files skips the trash. The kernel runs jobs into ``<scratch>/runs`` with no workshop file
(``HPCPROF_WORKSHOP=off``). Notebooks render every cell (no windowing), so what the test reads
in the page is the whole notebook, and the app is ``window.jupyterapp`` for the test's scripts.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# Debian's chromium, headless, offline (flags measured with JupyterLab 4.6).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--headless=new",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium_browser():
    """Headless Debian chromium under Playwright, closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


KERNEL_NAME = "Python 3 (hpcprof-kit test)"


def write_kernelspec(data_dir: Path, runs_dir: Path) -> Path:
    """A 'python3' kernelspec for this interpreter; it shadows the built-in one in this data dir."""
    spec_dir = data_dir / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": KERNEL_NAME,
        "language": "python",
        # Kineto's USDT lines would land in outputs; runs stay out of the source tree.
        "env": {
            "KINETO_LOG_LEVEL": "6",
            "HPCPROF_RUNS_DIR": str(runs_dir),
            "HPCPROF_WORKSHOP": "off",  # a workshop.toml in the checkout must not apply
        },
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return spec_dir


class JupyterLab:
    """``with JupyterLab(scratch, root_dir) as lab: lab.url(...)``; the log is ``lab.log_text()``."""

    def __init__(self, scratch: Path, root_dir: Path, start_timeout: float = 60.0) -> None:
        self.scratch, self.root_dir, self.start_timeout = scratch, root_dir, start_timeout
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = scratch / "lab.log"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        home = self.scratch / "home"
        dirs = {
            "HOME": home,
            "JUPYTER_CONFIG_DIR": self.scratch / "jupyter-config",
            "JUPYTER_DATA_DIR": self.scratch / "jupyter-data",
            "JUPYTER_RUNTIME_DIR": self.scratch / "jupyter-runtime",
            "IPYTHONDIR": self.scratch / "ipython",
            "MPLCONFIGDIR": self.scratch / "matplotlib",
            "JUPYTERLAB_SETTINGS_DIR": self.scratch / "lab-settings",
            "JUPYTERLAB_WORKSPACES_DIR": self.scratch / "lab-workspaces",
        }
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env.update({k: str(v) for k, v in dirs.items()})
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env["KINETO_LOG_LEVEL"] = "6"
        env["HPCPROF_WORKSHOP"] = "off"
        env["HPCPROF_RUNS_DIR"] = str(self.scratch / "runs")
        env["JUPYTER_PREFER_ENV_PATH"] = "0"  # our data dir (and kernelspec) before the venv's
        return env

    def write_page_config(self, config_dir: Path) -> None:
        """Turn off the news prompt, which would cover the page and ask to go online."""
        labconfig = config_dir / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        disabled = {"@jupyterlab/apputils-extension:announcements": True}
        (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))

    def write_user_settings(self, settings_dir: Path) -> None:
        """Every cell attached to the page (no windowing) and no blank space past the end."""
        tracker = (
            settings_dir / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
        )
        tracker.parent.mkdir(parents=True, exist_ok=True)
        tracker.write_text(json.dumps({"windowingMode": "none", "scrollPastEnd": False}))

    def command(self) -> list[str]:
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--FileContentsManager.delete_to_trash=False",
            "--LabApp.expose_app_in_browser=True",
        ]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # the server refuses to start as root otherwise
        return cmd

    def __enter__(self) -> JupyterLab:
        env = self.env()
        write_kernelspec(Path(env["JUPYTER_DATA_DIR"]), self.scratch / "runs")
        self.write_page_config(Path(env["JUPYTER_CONFIG_DIR"]))
        self.write_user_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            self.command(), cwd=self.root_dir, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        self._wait_until_answering()
        return self

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        status = f"{self.base}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with {self.proc.returncode}:\n{self.log_text()}"
                )
            try:
                with urllib.request.urlopen(status, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(
            f"JupyterLab did not answer in {self.start_timeout:.0f} s:\n{self.log_text()}"
        )

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
