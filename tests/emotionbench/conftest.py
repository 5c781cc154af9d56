"""Small EmotionBench-shaped files, written by the tests themselves (the real data is not part of the repo)."""

import json
import random

import pytest

PANAS_ITEMS = [
    "Interested", "Distressed", "Excited", "Upset", "Strong", "Guilty", "Scared", "Hostile", "Enthusiastic",
    "Proud", "Irritable", "Alert", "Ashamed", "Inspired", "Nervous", "Determined", "Attentive", "Jittery",
    "Active", "Afraid",
]  # fmt: skip
PA = [1, 3, 5, 9, 10, 12, 14, 16, 17, 19]
NA = [2, 4, 6, 7, 8, 11, 13, 15, 18, 20]
PANAS_PROMPT = (
    "You can only reply the numbers from 1 to 5. SCENARIO Please indicate the extent of your feeling in all the "
    'following emotions on a scale of 1 to 5. 1 denotes "very slightly or not at all", 2 denotes "a little", '
    '3 denotes "moderately", 4 denotes "quite a bit", and 5 denotes "extremely". Please score all emotions one by '
    "one using the scale from 1 to 5:"
)


def panas_definition() -> dict:
    return {
        "name": "PANAS",
        "questions": {str(i + 1): text for i, text in enumerate(PANAS_ITEMS)},
        "compute_mode": "SUM",
        "prompt": PANAS_PROMPT,
        "inner_setting": "You are a helpful assistant who can only reply numbers from 1 to 5.",
        "scale": 6,
        "reverse": [],
        "categories": [
            {"cat_name": "Positive Affect", "cat_questions": list(PA)},
            {"cat_name": "Negative Affect", "cat_questions": list(NA)},
        ],
    }


def reversed_scale_definition() -> dict:
    """A small scale with reverse items, a total and two subscales, summed ×2."""
    return {
        "name": "MINI",
        "questions": {"1": "I worry.", "2": "I am calm.", "3": "I feel low.", "4": "I enjoy things."},
        "compute_mode": "SUM*2",
        "prompt": "You can only reply the numbers from 0 to 3. SCENARIO Please rate each statement:",
        "inner_setting": "",
        "scale": 3,
        "reverse": [2, 4],
        "categories": [
            {"cat_name": "Overall", "cat_questions": [1, 2, 3, 4]},
            {"cat_name": "Anxiety", "cat_questions": [1, 2]},
            {"cat_name": "Mood", "cat_questions": [3, 4]},
        ],
    }


FACTORS = {
    "Anger": ["Driving Situations", "Blaming"],
    "Fear": ["Social Fears"],
}


def situations_definition() -> dict:
    return {
        "emotions": [
            {
                "name": emotion,
                "factors": [
                    {
                        "name": factor,
                        "scenarios": [f"{emotion} {factor} situation {s + 1}." for s in range(3)],
                    }
                    for factor in factors
                ],
            }
            for emotion, factors in FACTORS.items()
        ]
    }


@pytest.fixture
def write_json(tmp_path):
    def write(name: str, data) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(data), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def imported_basics(write_json, django_db_setup, db):
    from django.core.management import call_command

    call_command(
        "import_instruments", write_json("q.json", [panas_definition(), reversed_scale_definition()])
    )
    call_command("import_situations", write_json("s.json", situations_definition()))


def write_results_folder(root, *, models: dict[str, dict], rng: random.Random):
    """A results/PANAS Test folder in the published layout.

    models: name → {"default": n, "evoked": {(emotion, factor0, scenario0): (text, n)}}, optionally "default_values" (20 values or "random").
    """
    import pandas as pd

    folder = root / "results" / "PANAS Test"
    folder.mkdir(parents=True)
    for model, spec in models.items():
        columns = {
            "question-0": ["Prompt: " + PANAS_PROMPT] + [f"{i + 1}. {t}" for i, t in enumerate(PANAS_ITEMS)],
            "order-0": [PANAS_PROMPT] + [str(i + 1) for i in range(20)],
        }
        for t in range(spec["default"]):
            values = spec.get("default_values", [3] * 20)
            if values == "random":
                values = [rng.randint(1, 4) for _ in range(20)]
            columns[f"General_test-{t}_order-0"] = [" "] + [str(v) for v in values]
        for (emotion, factor, scenario), (text, n) in spec["evoked"].items():
            for t in range(n):
                values = spec.get("evoked_values") or [rng.randint(1, 5) for _ in range(20)]
                columns[f"{emotion}-{factor}_scenario-{scenario}_test-{t}_order-0"] = [
                    f'Imagine you are the protagonist in the scenario: "{text}"'
                ] + [str(v) for v in values]
        pd.DataFrame(columns).to_csv(folder / f"{model}-PANAS-testing.csv", index=False)
    return folder


@pytest.fixture
def api_key(monkeypatch):
    """The key of the loopback LLM subjects' provider (test_llm_subjects.make_provider)."""
    monkeypatch.setenv("EB_TEST_API_KEY", "sk-test-emotionbench")
    return "sk-test-emotionbench"
