import pytest
from django.core.management import CommandError, call_command

from studies.models import Instrument, InstrumentCategory, InstrumentItem, Situation

from .conftest import panas_definition, reversed_scale_definition, situations_definition

pytestmark = pytest.mark.django_db


def test_it_imports_instruments_with_range_anchors_reverse_items_and_categories(write_json, capsys):
    path = write_json("q.json", [panas_definition(), reversed_scale_definition()])
    call_command("import_instruments", path)
    panas = Instrument.objects.get(name="PANAS")
    assert (panas.scale_min, panas.scale_max, panas.compute_mode) == (1, 5, "SUM")
    assert panas.anchors == [
        "very slightly or not at all",
        "a little",
        "moderately",
        "quite a bit",
        "extremely",
    ]
    assert panas.items.count() == 20 and panas.items.get(number=20).text == "Afraid"
    assert dict(panas.categories.values_list("name", "item_numbers"))["Positive Affect"][:3] == [1, 3, 5]
    mini = Instrument.objects.get(name="MINI")
    assert (mini.scale_min, mini.scale_max, mini.compute_mode) == (0, 3, "SUM*2")
    assert set(mini.items.filter(reverse_scored=True).values_list("number", flat=True)) == {2, 4}
    assert "created 2" in capsys.readouterr().out


def test_reimporting_the_same_instruments_changes_nothing(write_json, capsys):
    path = write_json("q.json", [panas_definition()])
    call_command("import_instruments", path)
    ids = list(InstrumentItem.objects.values_list("id", flat=True))
    call_command("import_instruments", path)
    assert "created 0, updated 0, unchanged 1" in capsys.readouterr().out
    assert list(InstrumentItem.objects.values_list("id", flat=True)) == ids
    assert InstrumentCategory.objects.count() == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda q: q["categories"][1]["cat_questions"].append(1), "overlap on items [1]"),
        (lambda q: q["categories"][1]["cat_questions"].remove(20), "items [20] belong to no category"),
        (lambda q: q.update(categories=[]), "needs at least one category"),
        (lambda q: q.update(reverse=[21]), "reverse: items [21] are not in the item list"),
        (lambda q: q.update(scale=7), "does not fit the range 1..5"),
        (lambda q: q.update(scale_min=5, scale_max=1), "bad range 5..1"),
        (lambda q: q["questions"].pop("7"), "numbered 1..19 without gaps"),
        (lambda q: q.update(compute_mode="AVG"), "compute_mode"),
    ],
)
def test_a_bad_instrument_is_rejected_with_where_and_nothing_is_imported(write_json, mutate, message):
    bad = panas_definition()
    mutate(bad)
    path = write_json("q.json", [reversed_scale_definition(), bad])
    with pytest.raises(CommandError) as excinfo:
        call_command("import_instruments", path)
    assert message in str(excinfo.value)
    assert "$[1] (PANAS)" in str(excinfo.value)
    assert not Instrument.objects.exists()  # the valid first instrument was not written either


def test_it_imports_situations_idempotently(write_json, capsys):
    path = write_json("s.json", situations_definition())
    call_command("import_situations", path)
    assert Situation.objects.count() == 9
    situation = Situation.objects.get(emotion="Anger", factor_index=2, index=3)
    assert situation.factor_name == "Blaming" and situation.code == "Anger-2_scenario-3"
    call_command("import_situations", path)
    assert "created 0, updated 0, unchanged 9" in capsys.readouterr().out
    assert Situation.objects.count() == 9


def test_an_unknown_emotion_is_an_error_naming_its_json_path(write_json):
    data = situations_definition()
    data["emotions"][1]["name"] = "Boredom"
    with pytest.raises(CommandError) as excinfo:
        call_command("import_situations", write_json("s.json", data))
    assert "$.emotions[1].name: unknown emotion 'Boredom'" in str(excinfo.value)
    assert not Situation.objects.exists()
