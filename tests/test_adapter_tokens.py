"""Pure parts of the full-size VLA adapters, against hand-computed numbers: OpenVLA's action
tokens, the three normalisation schemes, the flow convention and RTC's soft mask."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learner.models.adapters.action_tokens import ActionTokenizer
from learner.models.adapters.normalization import normalize, unnormalize


def test_action_tokens_use_the_last_256_ids_and_255_centres() -> None:
    tok = ActionTokenizer(vocab_size=32000)
    assert tok.first_id == 31744 and len(tok.centres) == 255
    # bin edges are k * 2/255 - 1: 0.5 lies between edge 191 (0.49804) and 192 (0.50588) -> digitize
    # 192
    assert tok.encode(np.array([0.5])).tolist() == [32000 - 192]
    assert tok.decode(np.array([32000 - 192])).tolist() == pytest.approx(
        [(191 * 2 / 255 - 1 + 192 * 2 / 255 - 1) / 2]
    )
    # out of range is clipped on the way in and clamped on the way out
    assert tok.encode(np.array([-3.0, 3.0])).tolist() == [31999, 31744]
    assert tok.decode(np.array([31000, 32063])).tolist() == pytest.approx(
        [tok.centres[-1], tok.centres[0]]
    )
    # a round trip lands within half a bin
    a = np.linspace(-1, 1, 101)
    assert np.max(np.abs(tok.decode(tok.encode(a)) - a)) <= 1 / 255 + 1e-9


def test_bounds_q99_maps_minus_one_and_one_onto_the_quantiles_except_masked_dims() -> None:
    stats = {"q01": [-0.2, 0.0, 0.0], "q99": [0.6, 2.0, 1.0], "mask": [True, True, False]}
    out = unnormalize("bounds_q99", np.array([[-1.0, 1.0, 0.7], [0.0, 0.5, -1.0]]), stats)
    np.testing.assert_allclose(out, [[-0.2, 2.0, 0.7], [0.2, 1.5, -1.0]], atol=1e-12)
    back = normalize("bounds_q99", out, stats)
    np.testing.assert_allclose(back, [[-1.0, 1.0, 0.7], [0.0, 0.5, -1.0]], atol=1e-12)
    assert normalize("bounds_q99", np.array([5.0, -5.0, 0.3]), stats).tolist() == pytest.approx(
        [1.0, -1.0, 0.3]
    )


def test_mean_std_and_quantile_schemes() -> None:
    s = {"mean": [1.0, -2.0], "std": [2.0, 0.5], "q01": [0.0, -4.0], "q99": [10.0, 4.0]}
    x = np.array([3.0, -1.0])
    assert normalize("mean_std", x, s).tolist() == pytest.approx(
        [2.0 / (2.0 + 1e-6), 1.0 / (0.5 + 1e-6)]
    )
    assert normalize("quantile", x, s).tolist() == pytest.approx(
        [3 / (10 + 1e-6) * 2 - 1, 3 / (8 + 1e-6) * 2 - 1]
    )
    for scheme in ("mean_std", "quantile"):
        assert unnormalize(scheme, normalize(scheme, x, s), s).tolist() == pytest.approx(x.tolist())


def test_missing_or_misfit_statistics_are_named() -> None:
    with pytest.raises(KeyError, match="lack 'q99'"):
        normalize("quantile", np.zeros(2), {"q01": [0, 0]})
    with pytest.raises(ValueError, match="'mean' has 3 entries, the data has 2"):
        normalize("mean_std", np.zeros(2), {"mean": [0, 0, 0], "std": [1, 1]})
    with pytest.raises(KeyError, match="normalisation"):
        normalize("minmax", np.zeros(2), {})


def test_flow_convention_and_rtc_mask() -> None:
    torch = pytest.importorskip("torch")
    from learner.models.adapters import flow

    actions, noise = torch.tensor([[[2.0]]]), torch.tensor([[[-1.0]]])
    x_t, u_t = flow.flow_targets(actions, noise, torch.tensor([0.25]))
    assert (
        x_t.item() == pytest.approx(0.25 * -1 + 0.75 * 2) and u_t.item() == -3.0
    )  # u = noise - actions
    assert (x_t - 0.25 * u_t).item() == pytest.approx(
        2.0
    )  # the denoised estimate recovers the actions
    t = flow.sample_time(10000)
    assert (
        0.001 <= float(t.min())
        and float(t.max()) <= 1.0
        and float(t.mean()) == pytest.approx(0.6 * 0.999 + 0.001, abs=0.01)
    )
    w = flow.rtc_weights(8, delay=2, execute_horizon=3).tolist()
    c = [(5 - i) / 4 for i in (2, 3, 4)]
    assert w[:2] == [1.0, 1.0] and w[5:] == [0.0, 0.0, 0.0]
    assert w[2:5] == pytest.approx([x * (math.exp(x) - 1) / (math.e - 1) for x in c])


def test_exact_velocity_field_is_integrated_to_the_data_and_guidance_pins_the_prefix() -> None:
    torch = pytest.importorskip("torch")
    from learner.models.adapters import flow

    target = torch.linspace(-1, 1, 6).view(1, 6, 1)
    # the optimal field for one data point: u = (x_t - a) / t  (noise = (x_t - (1 - t) a) / t)
    vel = lambda x, t: (x - target) / t.view(-1, 1, 1)  # noqa: E731
    out = flow.sample(
        vel, torch.randn(1, 6, 1, generator=torch.Generator().manual_seed(0)), steps=10
    )
    assert torch.allclose(out.actions, target, atol=1e-5) and out.chain.shape == (1, 11, 6, 1)
    # a learned (here: linear) field that ignores the prefix still follows it where RTC guides
    free = lambda x, t: x - 0.0 * t.view(-1, 1, 1)  # noqa: E731  (pushes x to 0 as t -> 0)
    prefix = torch.full((1, 3, 1), 0.8)
    plain = flow.sample(free, torch.zeros(1, 6, 1), steps=10).actions
    guided = flow.sample(
        free, torch.zeros(1, 6, 1), steps=10, prefix=prefix, delay=3, execute_horizon=1
    ).actions
    assert plain.abs().max() < 1e-6
    assert guided[0, :3, 0].min() > 0.4 and guided[0, 5, 0].abs() < 0.1
