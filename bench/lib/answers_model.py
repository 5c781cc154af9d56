"""What the authenticity bench's simulated participants answer, and the study's simulated LLM judge.

Every reply has a latent quality (normal, one per response). The judge (an LLM) sees it with a little noise; a
person sees it through their own view of each reply (drawn once per person and reply, wider noise) plus a
little noise each time they answer (so a consistency pair's two answers are close); an LLM-driven agent answers
as the judge does most of the time (models agree with models). The widths are set so that people agree with the
judge at Cohen's kappa about 0.2-0.4 (people's agreement with each other on these items; docs/participants.md)
and agents at about 0.7-0.9: `calibration()` measures both on the seeded items and the bench reports it.

Rating items: the quality cut into Good / Okay / Bad. Pairs: the difference of the two replies' qualities cut
into A / B / about the same. Pages are recognised by their reply text(s), as a reader recognises them.
"""

from __future__ import annotations

import random
import statistics

from studies.authenticity_reasons import cohen_kappa

JUDGE_NOISE, PERSON_VIEW, PERSON_NOISE, AGENT_COPIES_JUDGE = 0.35, 0.9, 0.3, 0.6
RATING = ("Good", "Okay", "Bad")
PAIR = ("A is more empathetic", "B is more empathetic", "About the same")


def rating_cut(x: float) -> str:
    return "Good" if x > 0.45 else ("Okay" if x > -0.35 else "Bad")


def pair_cut(d: float) -> str:
    return PAIR[0] if d > 0.4 else (PAIR[1] if d < -0.4 else PAIR[2])


class Latent:
    """The seeded items' qualities and the judge's answers, keyed by reply text."""

    def __init__(self, texts: list[str], seed: int):
        rng = random.Random(seed)
        self.quality = {text: rng.gauss(0.2, 0.9) for text in texts}
        self.judge_view = {text: q + rng.gauss(0, JUDGE_NOISE) for text, q in self.quality.items()}

    def judge(self, key: tuple[str, ...]) -> str:
        if len(key) == 1:
            return rating_cut(self.judge_view.get(key[0], 0.0))
        return pair_cut(self.judge_view.get(key[0], 0.0) - self.judge_view.get(key[1], 0.0))


class Answerer:
    """One participant's way of answering: a person's own views, or an agent that answers like the judge."""

    def __init__(self, latent: Latent, rng: random.Random, *, agent: bool):
        self.latent, self.rng, self.agent = latent, rng, agent
        self.view: dict[str, float] = {}

    def _seen(self, text: str) -> float:
        if text not in self.view:
            self.view[text] = self.latent.quality.get(text, 0.0) + self.rng.gauss(0, PERSON_VIEW)
        return self.view[text] + self.rng.gauss(0, PERSON_NOISE)

    def answer(self, key: tuple[str, ...]) -> str:
        if self.agent:
            if self.rng.random() < AGENT_COPIES_JUDGE:
                return self.latent.judge(key)
            view = {t: self.latent.judge_view.get(t, 0.0) + self.rng.gauss(0, JUDGE_NOISE) for t in key}
        else:
            view = {t: self._seen(t) for t in key}
        if len(key) == 1:
            return rating_cut(view[key[0]])
        return pair_cut(view[key[0]] - view[key[1]])


def calibration(latent: Latent, *, pairs: bool, n: int = 400, items: int = 10, seed: int = 7) -> dict:
    """Median kappa with the judge of `n` simulated people and agents answering `items` items each."""
    rng = random.Random(seed)
    texts = list(latent.quality)
    out = {}
    for kind in ("people", "agents"):
        kappas = []
        for _ in range(n):
            who = Answerer(latent, random.Random(rng.random()), agent=kind == "agents")
            keys = [tuple(rng.sample(texts, 2 if pairs else 1)) for _ in range(items)]
            kappa = cohen_kappa([who.answer(k) for k in keys], [latent.judge(k) for k in keys])
            if kappa is not None:
                kappas.append(kappa)
        out[f"{kind}_kappa_with_judge_median"] = round(statistics.median(kappas), 2)
    return out
