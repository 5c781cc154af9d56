"""Replies to one prompt that say (nearly) the same thing under two conditions.

A participant asked which of two identical replies is more empathetic can only guess, and the guess would be
counted as a preference. So, in every study kind, two conditions' replies (sample 0) to the same prompt whose
words are identical or nearly so (`near_identical`: case, punctuation and spacing ignored, then at least
NEAR_IDENTICAL of difflib's similarity) both get the review flag SAME_AS_OTHER_CONDITION when they are
imported or generated (`same_replies_flag`); the admin's review lists it. What it changes:

* a pairwise study never deals such two replies as a pair while the researcher has not decided
  (`undecided_same_pairs`): approving either reply (the admin's "Approve selected responses after review")
  lets the pair be dealt; editing or replacing one, then approving it, too. The prompt's other pairs are dealt
  as usual;
* a rating study shows one reply at a time, so the flag is information for the review, nothing more.
"""

from __future__ import annotations

import re
from collections import defaultdict
from difflib import SequenceMatcher
from itertools import combinations

from django.db import transaction

from .models import Response, Study

SAME_AS_OTHER_CONDITION = "same_as_other_condition"
NEAR_IDENTICAL = 0.9
_NOT_WORDS = re.compile(r"[\W_]+")


def reply_fingerprint(text: str) -> str:
    """A reply reduced to its words (case, punctuation and spacing ignored): near-identical replies share it."""
    return " ".join(_NOT_WORDS.sub(" ", (text or "").casefold()).split())


def near_identical(a: str, b: str) -> bool:
    fa, fb = reply_fingerprint(a), reply_fingerprint(b)
    if not fa or not fb:
        return False
    if fa == fb:
        return True
    matcher = SequenceMatcher(None, fa, fb, autojunk=False)
    return matcher.real_quick_ratio() >= NEAR_IDENTICAL and matcher.ratio() >= NEAR_IDENTICAL


def _same_pairs(rows) -> set[tuple[int, int, int]]:
    """(prompt id, smaller condition id, larger) of the near-identical replies among `rows` (id, prompt,
    condition, text)."""
    by_prompt = defaultdict(list)
    for _pk, prompt, condition, text in rows:
        by_prompt[prompt].append((condition, text))
    found = set()
    for prompt, replies in by_prompt.items():
        for (c1, t1), (c2, t2) in combinations(sorted(replies), 2):
            if c1 != c2 and near_identical(t1, t2):
                found.add((prompt, c1, c2))
    return found


def same_replies_flag(*, study: Study | int, prompt_ids=None) -> int:
    """Adds SAME_AS_OTHER_CONDITION to the review flags of every reply (sample 0) of the study, or of those
    prompts, that is near-identical to another condition's reply to its prompt. Returns how many replies were
    newly flagged; a reply already carrying the flag is left as it is. Rows are locked while flagged."""
    rows = Response.objects.filter(condition__study=study, sample_index=0)
    if prompt_ids is not None:
        rows = rows.filter(prompt_id__in=prompt_ids)
    rows = list(rows.order_by().values_list("pk", "prompt_id", "condition_id", "text"))
    pairs = _same_pairs(rows)
    if not pairs:
        return 0
    keys = {(p, c) for p, c1, c2 in pairs for c in (c1, c2)}
    ids = [pk for pk, prompt, condition, _t in rows if (prompt, condition) in keys]
    flagged = 0
    with transaction.atomic():
        for response in Response.objects.select_for_update().filter(pk__in=ids).order_by("pk"):
            if SAME_AS_OTHER_CONDITION in (response.review_flags or []):
                continue
            response.review_flags = [*(response.review_flags or []), SAME_AS_OTHER_CONDITION]
            response.save(update_fields=["review_flags", "updated_at"])
            flagged += 1
    return flagged


def undecided_same_pairs(study: Study) -> set[tuple[int, int, int]]:
    """(prompt id, smaller condition id, larger) of flagged near-identical replies that the researcher has not
    decided on (neither reply approved after review): never dealt as a pair."""
    rows = [
        (pk, prompt, condition, text)
        for pk, prompt, condition, text, flags, review in Response.objects.filter(
            condition__study=study, sample_index=0
        )
        .exclude(review=Response.Review.APPROVED)
        .exclude(review_flags=[])
        .order_by()
        .values_list("pk", "prompt_id", "condition_id", "text", "review_flags", "review")
        if SAME_AS_OTHER_CONDITION in (flags or [])
    ]
    return _same_pairs(rows)
