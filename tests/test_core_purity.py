"""nutchy.core is pure: it imports no Scrapy, Twisted, happybase or Redis (DESIGN §3)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import nutchy.core

BANNED = ["scrapy", "twisted", "happybase", "thriftpy2", "redis", "scrapy_redis"]


def test_core_modules_import_without_frameworks():
    modules = [m.name for m in pkgutil.iter_modules(nutchy.core.__path__, "nutchy.core.")]
    assert "nutchy.core.urls" in modules
    code = (
        "import sys\n"
        f"for name in {BANNED!r}:\n"
        "    sys.modules[name] = None\n"
        f"for module in {modules!r}:\n"
        "    __import__(module)\n"
        "print('ok', len(sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
