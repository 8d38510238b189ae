"""A stand-in for the release engine, shared by the tradeoff tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.io.atomic import write_json
from censusdp.io.cef import read_cef
from synth import write_record_release


class FakeEngine:
    """A stand-in for the TopDown engine with the same keyword arguments.

    It moves a share ``min(1, 1/(2 eps))`` of persons to another block of their tract
    (tract totals stay exact) and jitters their ages, then writes the MDF files
    and a manifest with the budget's geolevels: accuracy and disclosure both fall as
    epsilon falls. Counts its calls.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []
        self.__name__ = "fake_engine"

    def __call__(self, input_dir, out_dir, *, budget, seed, workers):
        from censusdp.privacy import accounting

        eps = float(accounting.epsilon_from_rho(budget.total, budget.delta))
        self.calls.append((budget.name, round(eps, 6)))
        cef = read_cef(input_dir)
        p, u = cef.persons, cef.units
        rng = np.random.default_rng(seed)
        n = p["age"].size
        q = min(1.0, 0.5 / eps)
        geo = np.asarray(p["geocode"]).astype("U16")
        blocks = np.unique(np.asarray(u["geocode"]).astype("U16"))
        move = rng.random(n) < q
        new = geo.copy()
        for i in np.flatnonzero(move):
            same_tract = blocks[blocks.astype("U11") == geo[i][:11]]
            new[i] = same_tract[rng.integers(same_tract.size)]
        age = np.where(
            rng.random(n) < q, np.clip(p["age"] + rng.integers(-4, 5, n), 0, 115), p["age"]
        )
        out = Path(out_dir)
        persons = {"geocode": new, "hhgq": p["hhgq"], "sex": p["sex"], "age": age}
        persons.update(hispanic=p["hispanic"], cenrace=p["cenrace"])
        units = {k: np.asarray(u[k]) for k in ("geocode", "gqtype", "occupied")}
        h = Hierarchy.from_blocks(np.concatenate([blocks, np.asarray(u["geocode"])]))
        write_record_release(out, persons, units, h, "dhc-lite")
        write_json(
            {"geolevels": [[n_, k] for n_, k in budget.geolevels], "seed": seed},
            out / "manifest.json",
        )
        return {}


def build_results(truth, out, *, attack: bool = True):
    """A two-scenario ``tradeoff census`` result on the stand-in engine (epsilons 0.5, 2, 8)."""
    from censusdp.tradeoff.census import CensusTradeoffOptions, census_tradeoff

    options = CensusTradeoffOptions(
        epsilons=[0.5, 2, 8], seeds=[1], attack_preset="dhc-lite-demo" if attack else None
    )
    return census_tradeoff(truth, out, options, release_runner=FakeEngine(), overwrite=True)
