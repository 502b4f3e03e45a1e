"""Readable default names, as Determined gives unnamed experiments ("Experiment (brave-otter)")."""

from __future__ import annotations

import random

__all__ = ["petname"]

_ADJECTIVES = [
    "amber",
    "bold",
    "brave",
    "bright",
    "calm",
    "clever",
    "crisp",
    "eager",
    "fair",
    "gentle",
    "glad",
    "grand",
    "keen",
    "kind",
    "lively",
    "lucid",
    "merry",
    "mighty",
    "neat",
    "nimble",
    "noble",
    "proud",
    "quick",
    "quiet",
    "rapid",
    "sharp",
    "shiny",
    "steady",
    "sunny",
    "swift",
    "tidy",
    "vivid",
    "warm",
    "wise",
    "witty",
]
_NOUNS = [
    "badger",
    "beaver",
    "bison",
    "condor",
    "crane",
    "dingo",
    "eagle",
    "falcon",
    "ferret",
    "gecko",
    "heron",
    "ibis",
    "jaguar",
    "koala",
    "lemur",
    "lynx",
    "marten",
    "moose",
    "newt",
    "ocelot",
    "otter",
    "panda",
    "puffin",
    "quokka",
    "raven",
    "robin",
    "seal",
    "stork",
    "tapir",
    "tern",
    "viper",
    "walrus",
    "wombat",
    "yak",
    "zebra",
]


def petname(rng: random.Random | None = None) -> str:
    """``adjective-noun``."""
    r = rng or random.Random()
    return f"{r.choice(_ADJECTIVES)}-{r.choice(_NOUNS)}"
