"""Texts the demo studies share (their consent forms' terms, their instructions' definition of empathy), and the
corpus the rating and pairwise demos show."""

from pathlib import Path

DEMO_CORPUS = Path(__file__).resolve().parent / "prompts.csv"

TAKING_PART = """\
Taking part is voluntary and you may stop at any time by closing the page. We store your answers and your \
recruiting platform's anonymous id, never your name or e-mail address. Answers are analysed in aggregate for \
research."""

EMPATHY_SIDES = """\
Empathy has three sides. Cognitive empathy: understanding what the other person thinks and feels. \
Affective empathy: sharing or resonating with their feelings. Compassionate empathy: wanting to help \
or support them."""
