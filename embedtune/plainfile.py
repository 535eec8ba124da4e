"""What embedtune may take as its own file to replace or remove: a regular file, not a link, with no
other name (a hard link's other name is someone's file). The checkpoint folder and TensorBoard's projector
files ask it; it imports nothing of the project, so the cheap checks that reach both stay cheap."""

from __future__ import annotations

import os
import stat


def plain_file(path: str) -> bool:
    """A regular file, not a link, with no other name."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1
