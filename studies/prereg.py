"""The pre-registration document of a study, generated from its frozen design (or, for a draft, from the design
it would freeze at launch): Markdown for the terminal (`study_design --prereg`), the same sections as HTML in
the admin (templates/admin/studies/study/prereg.html)."""

from __future__ import annotations

import json
from typing import Any

from .design import canonical_json, design_build, design_current, design_sha256
from .exclusion_rules import RULE_TITLES, exclusion_rules_words
from .models import Study
from .selectors import study_design_summary


def prereg_context(study: Study) -> dict[str, Any]:
    """The document's content: the design (frozen or as it would be frozen), its hash, the amendments."""
    current = design_current(study)
    design = current.design if current is not None else json.loads(canonical_json(design_build(study)))
    summary = study_design_summary(study=study)
    fields = design["fields"]
    return {
        "study": study,
        "frozen": current is not None,
        "sha256": current.sha256 if current is not None else design_sha256(design),
        "frozen_at": current.created_at if current is not None else None,
        "design": design,
        "hypotheses": design["hypotheses"] or "(none written)",
        "planned": design["planned_analysis"] or {},
        "scale": ", ".join(f"{o['label']} = {o['value']}" for o in fields["scale"]),
        "scale_question": fields["scale_question"],
        "items_per_participant": fields["items_per_participant"],
        "ratings_per_response": fields["target_ratings_per_response"],
        "conditions": design["conditions"],
        "quotas": design["quotas"]["by_condition"],
        "n_prompts": design["prompts"]["count"],
        "checks": design["attention_checks"],
        "check_max_failures": fields["attention_check_max_failures"],
        "exclusion_rules": design["exclusion_rules"],
        "exclusion_words": _rules_in_words(design["exclusion_rules"]),
        "seed": fields["seed"],
        "parent": design.get("parent"),
        "amendments": summary["amendments"] if summary else [],
    }


def _rules_in_words(declared: dict | None) -> list[tuple[str, str]] | None:
    """(rule, what it excludes) of a declaration, in words; None when the study declared none."""
    if declared is None:
        return None
    return [(RULE_TITLES[rule], words) for rule, words in exclusion_rules_words(declared).items()]


def _llm_line(llm: dict | None) -> str:
    if not llm:
        return ""
    decoding = ", ".join(f"{k} {v}" for k, v in sorted(llm["decoding"].items()) if v is not None)
    return f" — {llm['provider']}/{llm['model']} ({decoding}; seed {llm['seed']})"


def prereg_markdown(study: Study) -> str:
    c = prereg_context(study)
    planned = c["planned"]
    state = f"frozen {c['frozen_at']:%Y-%m-%d %H:%M} UTC" if c["frozen"] else "draft: not frozen yet"
    lines = [
        f"# Pre-registration: {study.title}",
        "",
        f"- Study: `{study.slug}` ({study.kind} study), {state}",
        f"- Design SHA-256: `{c['sha256']}`",
    ]
    if c["parent"]:
        lines.append(
            f"- Follow-up wave of `{c['parent']['study']}` (design `{c['parent']['design_sha256']}`)"
        )
    lines += ["", "## Hypotheses", "", c["hypotheses"], "", "## Conditions", ""]
    for cond in c["conditions"]:
        baseline = " (baseline)" if cond["is_baseline"] else ""
        lines.append(
            f"- `{cond['name']}` {cond['label']}{baseline}: {cond['kind']}, "
            f"{c['quotas'][cond['name']]} participants{_llm_line(cond.get('llm'))}"
        )
    lines += [
        "",
        "## Materials and procedure",
        "",
        f"- Prompts: {c['n_prompts']} (ids and SHA-256 of each text in the design JSON)",
        f"- Question: {c['scale_question']}",
        f"- Scale: {c['scale']}",
        f"- Items per participant: {c['items_per_participant']}; ratings per response: {c['ratings_per_response']}",
        f"- Attention checks: {len(c['checks'])}; more than {c['check_max_failures']} failed flags a participant",
        f"- Seed of every random draw: {c['seed']}",
        "",
        "## Exclusion rules",
        "",
        *(
            [f"- {title}: {words}" for title, words in c["exclusion_words"]]
            if c["exclusion_words"] is not None
            else ["The analysis' default rules (attention checks, too fast, straight-lining)."]
        ),
        "",
        "## Planned analysis",
        "",
        *(f"- {test}" for test in planned.get("tests", [])),
        f"- α = {planned.get('alpha')}, correction: {planned.get('correction')}",
        "",
        "## Amendments",
        "",
    ]
    if not c["amendments"]:
        lines.append("None.")
    for a in c["amendments"]:
        lines.append(
            f"- {a['at']} by {a['author']}: `{a['field']}` {json.dumps(a['old'])} → {json.dumps(a['new'])} "
            f"— {a['reason']} (design {a['sha256_before'][:12]} → {a['sha256_after'][:12]})"
        )
    return "\n".join(lines) + "\n"
