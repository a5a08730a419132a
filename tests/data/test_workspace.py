"""A ``Workspace`` computes each result once per (name, the objects it is about, the arguments), hands out
copies a caller may change, lets go of what it is told to, and knows the frames put in trec_eval order while they
live; ``NO_WORKSPACE`` computes every time and knows nothing."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

from toolkit.data.workspace import NO_WORKSPACE, Workspace


def _counted(calls: list, value):
    def compute():
        calls.append(value)
        return value

    return compute


def test_once_per_name_objects_and_arguments():
    work, calls = Workspace(), []
    a, b = object(), object()
    assert work.once("x", (a,), (1,), _counted(calls, 1)) == 1
    assert work.once("x", (a,), (1,), _counted(calls, 2)) == 1  # the same: not computed again
    assert work.once("x", (b,), (1,), _counted(calls, 3)) == 3  # another object
    assert work.once("x", (a,), (2,), _counted(calls, 4)) == 4  # other arguments
    assert work.once("y", (a,), (1,), _counted(calls, 5)) == 5  # another name
    assert calls == [1, 3, 4, 5]
    assert work.has("x", (a,), (1,)) and not work.has("x", (a,), (3,))


def test_objects_are_told_apart_by_identity_not_equality():
    work, calls = Workspace(), []
    f, g = pd.DataFrame({"a": [1]}), pd.DataFrame({"a": [1]})  # equal, and not hashable
    work.once("x", (f,), (), _counted(calls, "f"))
    assert work.once("x", (g,), (), _counted(calls, "g")) == "g"
    assert calls == ["f", "g"]


def test_a_frame_is_handed_out_as_a_copy_and_arrays_read_only():
    work = Workspace()
    frame = pd.DataFrame({"a": [1, 2]})
    got = work.once("frame", (), (), lambda: frame)
    got["b"] = 1  # the caller's own column
    assert list(work.once("frame", (), (), lambda: None).columns) == ["a"]
    first, _ = work.once("arrays", (), (), lambda: (np.arange(3), 1))
    with pytest.raises(ValueError):
        first[0] = 5


def test_keep_only_lets_go_of_the_rest():
    work, calls, key = Workspace(), [], object()
    work.once("a", (key,), (), _counted(calls, 1))
    work.once("b", (key,), (), _counted(calls, 2))
    work.keep_only({"a"})
    assert work.once("a", (key,), (), _counted(calls, 10)) == 1  # kept
    assert work.once("b", (key,), (), _counted(calls, 20)) == 20  # let go: computed again
    assert calls == [1, 2, 20]


def test_ordered_frames_are_known_per_precision_while_they_live():
    work = Workspace()
    frame = pd.DataFrame({"a": [1]})
    assert not work.is_ordered(frame, "float32")
    work.mark_ordered(frame, "float32")
    work.mark_ordered(frame, "float64")
    assert work.is_ordered(frame, "float32") and work.is_ordered(frame, "float64")
    assert not work.is_ordered(pd.DataFrame({"a": [1]}), "float32")  # an equal frame is another frame
    assert not Workspace().is_ordered(frame, "float32")  # another workspace knows nothing of it
    del frame
    gc.collect()
    assert work._ordered == {}  # the mark went with the frame


def test_no_workspace_computes_every_time_and_knows_nothing():
    calls, key = [], object()
    assert NO_WORKSPACE.once("a", (key,), (), _counted(calls, 1)) == 1
    assert NO_WORKSPACE.once("a", (key,), (), _counted(calls, 2)) == 2
    assert calls == [1, 2] and not NO_WORKSPACE.has("a", (key,), ()) and not NO_WORKSPACE.keeps
    frame = pd.DataFrame({"a": [1]})
    NO_WORKSPACE.mark_ordered(frame, "float32")
    assert not NO_WORKSPACE.is_ordered(frame, "float32")
    NO_WORKSPACE.keep_only(())  # nothing to let go of, no error
