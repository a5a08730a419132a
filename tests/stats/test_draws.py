"""toolkit.stats.draws: the values of Generator.integers, the generator left in the same state."""

import numpy as np

from toolkit.stats import draws
from toolkit.stats.draws import coin_flips, raw_draws_hold


def test_raw_draws_hold_here():
    assert raw_draws_hold()


def _pairs():
    shapes = np.random.default_rng(3)
    for seed in range(60):
        yield shapes, np.random.default_rng(seed), np.random.default_rng(seed)


def test_coin_flips_are_integers_int8_draws_and_leave_the_same_state():
    """Shapes that start and end on every byte and 32-bit word, with another 32-bit draw between some calls."""
    for shapes, a, b in _pairs():
        for _ in range(8):
            size, n = int(shapes.integers(0, 25)), int(shapes.integers(0, 30))
            ref = a.integers(0, 2, size=(size, n), dtype=np.int8)
            got = coin_flips(b, size, n)
            assert got.dtype == np.int8 and got.shape == ref.shape and np.array_equal(got, ref)
            assert a.bit_generator.state == b.bit_generator.state
            if shapes.random() < 0.3:  # another draw between: it reads the same kept half
                assert a.integers(0, 1000, dtype=np.int32) == b.integers(0, 1000, dtype=np.int32)
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    assert np.array_equal(coin_flips(b, 2000, 6981), a.integers(0, 2, size=(2000, 6981), dtype=np.int8))
    assert a.bit_generator.state == b.bit_generator.state


def test_other_bit_generators_and_a_failed_check_draw_through_integers(monkeypatch):
    def mt():
        return np.random.Generator(np.random.MT19937(5))

    assert np.array_equal(coin_flips(mt(), 3, 7), mt().integers(0, 2, (3, 7), dtype=np.int8))
    calls = []
    monkeypatch.setattr(draws, "raw_draws_hold", lambda: False)
    monkeypatch.setattr(draws, "_words", lambda *a: calls.append(a))
    assert np.array_equal(
        coin_flips(np.random.default_rng(1), 3, 7), np.random.default_rng(1).integers(0, 2, (3, 7), dtype=np.int8)
    )
    assert calls == []


def test_permutation_test_the_same_as_drawn_through_integers(monkeypatch):
    """The p-values with the raw draws equal those drawn through rng.integers, to the bit."""
    from toolkit.stats.significance import permutation_test

    rng = np.random.default_rng(8)
    cases = [(rng.random(n), rng.random(n)) for n in (25, 333, 2001, 6980)]
    perms = (999, 4001, 2500, 3000)

    def run():
        return [permutation_test(a, b, permutations=p, seed=s) for (a, b), p, s in zip(cases, perms, range(4))]

    fast = run()
    monkeypatch.setattr(draws, "raw_draws_hold", lambda: False)
    assert run() == fast
