"""A custom command's words: what its run is called, and its relative paths made absolute.

>>> script_label(("python", "train.py"))
'train'
"""

from __future__ import annotations

import os
import re

# A custom command's script: the word that names its run; a relative one is made absolute.
SCRIPT_SUFFIXES = (".py", ".sh")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def script_label(command: tuple[str, ...]) -> str:
    """What a custom command's run is called: its script's stem, the module after ``-m``,
    else the program's name (characters a file name cannot take become ``_``).

    >>> script_label(("python", "/home/me/mlp.py", "--lr", "0.1"))
    'mlp'
    >>> script_label(("python3", "-m", "mypkg.train")), script_label(("./a.out",))
    ('train', 'a.out')
    """
    words = [str(w) for w in command]
    for i, word in enumerate(words):
        if i and words[i - 1] == "-m":
            return _UNSAFE.sub("_", word.rsplit(".", 1)[-1]) or "command"
        if not word.startswith("-") and word.endswith(SCRIPT_SUFFIXES):
            return _UNSAFE.sub("_", os.path.basename(word)[: -len(os.path.splitext(word)[1])])
    return _UNSAFE.sub("_", os.path.basename(words[0]) if words else "") or "command"


def absolute_paths(words: tuple[str, ...], cwd: str | None = None) -> tuple[str, ...]:
    """Words naming a script or a path that exists relative to ``cwd`` (default: here),
    made absolute: the job runs in its run directory, where the relative name finds nothing.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); _ = open(os.path.join(d, "mlp.py"), "w").close()
    >>> words = absolute_paths(("python", "mlp.py", "--out", "mlp.py.bak"), cwd=d)
    >>> words[1] == os.path.join(d, "mlp.py"), words[3]
    (True, 'mlp.py.bak')
    """
    base = cwd or os.getcwd()
    out = []
    for word in words:
        if not isinstance(word, str):  # validate() names it
            out.append(word)
            continue
        pathlike = "/" in word or word.endswith(SCRIPT_SUFFIXES)
        if pathlike and not word.startswith(("-", "/", "$", "~")) and "=" not in word:
            candidate = os.path.join(base, word)
            if os.path.isfile(candidate):
                word = os.path.normpath(candidate)
        out.append(word)
    return tuple(out)


def warn_missing_script(words: tuple[str, ...]) -> None:
    """Warn (KitWarning) when a relative script word names no file here: the job runs in its
    run directory, where it will not be either."""
    import warnings

    from hpcprof_kit.errors import KitWarning

    local = ("-", "/", "$", "~")  # flags, absolute paths and ones the shell expands
    for word in words:
        if word.endswith(SCRIPT_SUFFIXES) and not word.startswith(local):
            if os.path.isfile(word):
                continue
            warnings.warn(
                f"command word {word!r} names no file in {os.getcwd()}, and the job "
                "runs in its run directory; give the script's absolute path (a "
                "relative one is made absolute only when the file is where you are)",
                KitWarning,
                stacklevel=3,
            )
            return
