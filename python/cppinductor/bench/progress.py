"""Progress on stderr: a tqdm bar on a terminal when installed, else a plain counter."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool = True) -> None:
        self._total = total
        self._done = 0
        self._enabled = enabled
        self._tty = sys.stderr.isatty()
        self._bar = None
        if enabled and self._tty:  # a log file gets one plain line per step instead of \r redraws
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._bar = tqdm(total=total, file=sys.stderr, unit="step", leave=False)

    def start(self, what: str) -> None:
        """Announce the step about to run (long compiles show what they are)."""
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.set_description_str(what)
        else:
            line = f"[{self._done + 1}/{self._total}] {what}"
            if self._tty:
                sys.stderr.write("\r\033[K" + line)
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def advance(self) -> None:
        self._done += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._enabled and self._tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
