"""``models.matmul_precision`` and ``models.torch_threads``: a model's TF32 flags and thread count hold inside
the block only; the caller's settings (whatever they were) are back after it, an exception included."""

from __future__ import annotations

import pytest
from needs import required

from toolkit.models import matmul_precision, torch_threads


@pytest.fixture
def torch(monkeypatch):
    torch = required("torch", "the [rerank] extra is not installed")
    # the flags are process-wide settings torch keeps without a GPU too: the block sets them as on CUDA
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32, torch.get_num_threads()
    yield torch
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]
    torch.set_num_threads(saved[2])


@pytest.mark.parametrize(("caller", "cudnn"), [("highest", True), ("medium", False), ("high", True)])
@pytest.mark.parametrize("precision", ["tf32", "fp32", "fp16"])
def test_tf32_flags_hold_inside_the_block_only(torch, caller, cudnn, precision):
    torch.set_float32_matmul_precision(caller)
    torch.backends.cudnn.allow_tf32 = cudnn
    with pytest.raises(RuntimeError, match="inside"), matmul_precision(precision):
        assert torch.backends.cuda.matmul.allow_tf32 is (precision == "tf32")
        assert torch.backends.cudnn.allow_tf32 is (precision == "tf32")
        raise RuntimeError("inside")
    assert torch.get_float32_matmul_precision() == caller
    assert torch.backends.cudnn.allow_tf32 is cudnn


def test_without_cuda_the_flags_are_not_touched(torch, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    torch.set_float32_matmul_precision("medium")
    with matmul_precision("tf32"):
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == "medium"


@pytest.mark.parametrize("threads", [None, 0, 1, 2])
def test_thread_count_holds_inside_the_block_only(torch, threads):
    torch.set_num_threads(3)
    with pytest.raises(RuntimeError, match="inside"), torch_threads(threads):
        assert torch.get_num_threads() == (threads or 3)
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 3
