"""The pairwise kind's authenticity traps (the rules they share with every kind are in studies/authenticity.py):
its answers' buttons and the picture check's answers among them, a consistency pair's second showing (the same
prompt and replies, their sides swapped), and what a trap page's answer tells."""

from studies import authenticity
from studies.models import Participant

from .answer_review import judge_verdicts
from .models import PairItem

# The answers' buttons, in page order: (value, label, keyboard shortcut).
ANSWERS = (
    (PairItem.Choice.LEFT, "A is more empathetic", "1"),
    (PairItem.Choice.RIGHT, "B is more empathetic", "2"),
    (PairItem.Choice.TIE, "About the same", "3"),
)
# The picture check's answers (studies/authenticity_picture.py): the page's three buttons.
PICTURE_OPTIONS = [{"value": str(value), "label": label} for value, label, _key in ANSWERS]


def repeat_page(page: PairItem) -> PairItem:
    """A consistency pair's second showing of `page`: its replies' sides swapped, so the same preference is the
    other button."""
    return PairItem(prompt_id=page.prompt_id, left_id=page.right_id, right_id=page.left_id, trap="repeat")


def picture_page() -> PairItem:
    return PairItem(trap=PairItem.Trap.PICTURE)


def _preferred(left_id: int, right_id: int, choice: str) -> int | None:
    """The reply an answer prefers (None: about the same)."""
    return {PairItem.Choice.LEFT: left_id, PairItem.Choice.RIGHT: right_id}.get(choice)


def trap_scored(locked: Participant, pk: int, trap: str, choice: str) -> dict:
    """What a trap page's answer tells (`pair_answer_submit`'s, inside its lock): a consistency pair's second
    showing is far from the first when the two answers prefer different replies and the study's judges do not
    hold the two replies to be close (`near_tie`); about the same against either is a step, as a point is on a
    scale. The picture check's outcome."""
    if trap == PairItem.Trap.PICTURE:
        outcome = authenticity.picture_outcome(
            study=locked.study,
            participant_id=locked.pk,
            options=PICTURE_OPTIONS,
            value=choice,
            skipped=choice == PairItem.PICTURE_SKIP,
        )
        return {"picture": outcome}
    second = PairItem.objects.values_list("prompt_id", "left_id", "right_id").get(pk=pk)
    first = (
        PairItem.objects.filter(participant_id=locked.pk)
        .filter(prompt_id=second[0], trap="", answered_at__isnull=False)
        .values_list("left_id", "right_id", "choice")
        .first()
    )
    if first is None:
        return {}
    before, now = _preferred(*first), _preferred(second[1], second[2], choice)
    reversed_ = before is not None and now is not None and before != now
    return {"far": reversed_ and not near_tie(locked.study_id, second[1], second[2])}


def near_tie(study_id: int, left_id: int, right_id: int) -> bool:
    """Whether the study's comparing judges hold two replies to be close: one of them says "about the same", or
    they prefer different replies. A person may well pick a side of such a pair once and the other side the next
    time; that is no inconsistency. A pair no judge compared is not known to be close."""
    verdicts = judge_verdicts(study_id=study_id, ids=[left_id, right_id]).get((left_id, right_id), [])
    return bool(verdicts) and (3 in verdicts or len(set(verdicts)) > 1)
