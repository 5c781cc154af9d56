"""The pre-registration document of a study, generated from its frozen design (or, for a draft, from the design
it would freeze at launch): Markdown for the terminal (`study_design --prereg`), the same sections as HTML in
the admin (templates/admin/studies/study/prereg.html)."""

from __future__ import annotations

import json
from typing import Any

from .design import analysis_plan_of, canonical_json, design_build, design_current, design_sha256
from .exclusion_rules import RULE_TITLES, exclusion_rules_words
from .kinds import kind_of
from .models import Study
from .planned_analysis import correction_name, further_tests
from .selectors import study_design_summary


def prereg_context(study: Study) -> dict[str, Any]:
    """The document's content: the design (frozen or as it would be frozen), its hash, the amendments."""
    current = design_current(study)
    design = current.design if current is not None else json.loads(canonical_json(design_build(study)))
    summary = study_design_summary(study=study)
    fields = design["fields"]
    planned = design["planned_analysis"] or {}
    plan = analysis_plan_of(study)
    return {
        "study": study,
        "frozen": current is not None,
        "sha256": current.sha256 if current is not None else design_sha256(design),
        "frozen_at": current.created_at if current is not None else None,
        "design": design,
        "hypotheses": design["hypotheses"] or "(none written)",
        "planned": planned,
        # The kind's declaration: the primary test its analysis reports as primary, and the secondary ones.
        "primary_test": plan.primary.name if plan is not None else None,
        "secondary_tests": [test.name for test in plan.secondary] if plan is not None else [],
        "further_tests": further_tests(planned),
        "correction_name": correction_name(planned.get("correction", "")),
        "conditions": design["conditions"],
        "quotas": design["quotas"]["by_condition"],
        "n_prompts": design["prompts"]["count"],
        # What participants are asked and checked with, in the kind's words.
        "procedure": kind_of(study).prereg_procedure(study, design),
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
        *(f"- {line}" for line in c["procedure"]),
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
        *([f"- Primary test: {c['primary_test']}"] if c["primary_test"] else []),
        *(f"- Secondary: {test}" for test in c["secondary_tests"]),
        *(f"- Further test named by the researcher: {test}" for test in c["further_tests"]),
        f"- α = {planned.get('alpha')}, correction: {c['correction_name']}",
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


# --- the OSF pre-registration template's sections (the open-science bundle's documentation/) -----------------

OSF_SECTIONS = (
    "Study information",
    "Design plan",
    "Sampling plan",
    "Variables",
    "Analysis plan",
    "Deviations",
)


def prereg_osf(study: Study, *, answers: dict[str, str] | None = None) -> dict[str, Any]:
    """The pre-registration in the sections of the OSF Preregistration template, each a list of (question,
    answer) items with plain-text answers, from the same content as `prereg_markdown` (`prereg_context`).
    `answers` replaces the answers to some questions by their question ("Study type", "Measured variables"...):
    what the study's kind says of its own design."""
    c = prereg_context(study)
    planned = c["planned"]
    models = [f"primary: {c['primary_test']}"] if c["primary_test"] else []
    models += [f"secondary: {test}" for test in c["secondary_tests"]]
    models += [f"further test named by the researcher: {test}" for test in c["further_tests"]]
    conditions = [
        f"{cond['name']} ({cond['label'] or cond['name']}; {cond['kind']}"
        f"{', baseline' if cond['is_baseline'] else ''}){_llm_line(cond.get('llm'))}"
        for cond in c["conditions"]
    ]
    sections = {
        "Study information": [
            ("Title", study.title),
            ("Study", f"{study.slug} ({study.kind} study)"),
            ("Design SHA-256", c["sha256"]),
            ("Hypotheses", c["hypotheses"]),
        ],
        "Design plan": [
            ("Study type", "Experiment: participants are randomly assigned to conditions (between subjects)."),
            ("Conditions", "; ".join(conditions) or "(none)"),
            ("Randomisation", f"Every random draw (assignment, item order, attention-check places) is seeded "
                              f"with {c['seed']}."),
            ("Follow-up wave of", f"{c['parent']['study']} (design {c['parent']['design_sha256']})"
             if c["parent"] else "none: a study of its own"),
        ],
        "Sampling plan": [
            ("Sample size", "; ".join(f"{name}: {quota} participants" for name, quota in c["quotas"].items())),
            ("Stopping rule", "Each condition closes when its quota of participants has completed."),
            ("Materials", f"{c['n_prompts']} prompts"),
        ],
        "Variables": [
            ("Manipulated variables", "The condition that wrote the reply (see the design plan)."),
            ("Measured variables", " ".join(f"{line}." for line in c["procedure"]) or "(none declared)"),
        ],
        "Analysis plan": [
            ("Statistical models", "; ".join(models) or "the kind's default analysis"),
            ("Inference criteria", f"alpha = {planned.get('alpha')}, correction: {c['correction_name']}"),
            ("Data exclusion", "; ".join(f"{title}: {words}" for title, words in c["exclusion_words"])
             if c["exclusion_words"] is not None
             else "The analysis' default rules (attention checks, too fast, straight-lining)."),
        ],
        "Deviations": [
            (f"{a['at']} by {a['author']}: {a['field']}",
             f"{json.dumps(a['old'])} → {json.dumps(a['new'])}: {a['reason']} "
             f"(design {a['sha256_before']} → {a['sha256_after']})")
            for a in c["amendments"]
        ] or [("None", "The study ran as pre-registered.")],
    }  # fmt: skip
    return {
        "template": "OSF Preregistration",
        "study": study.slug,
        "frozen": c["frozen"],
        "frozen_at": c["frozen_at"].isoformat() if c["frozen_at"] else None,
        "design_sha256": c["sha256"],
        "sections": [
            {
                "title": title,
                "items": [
                    {"question": q, "answer": str((answers or {}).get(q, a))} for q, a in sections[title]
                ],
            }
            for title in OSF_SECTIONS
        ],
    }


def prereg_osf_markdown(document: dict) -> str:
    """`prereg_osf`'s document as Markdown: one heading per section, one paragraph per question."""
    state = f"frozen {document['frozen_at']}" if document["frozen"] else "draft: not frozen yet"
    lines = [
        f"# Pre-registration ({document['template']}): `{document['study']}`",
        "",
        f"Design SHA-256 `{document['design_sha256']}`, {state}.",
    ]
    for section in document["sections"]:
        lines += ["", f"## {section['title']}"]
        for item in section["items"]:
            lines += ["", f"**{item['question']}.** {item['answer']}"]
    return "\n".join(lines) + "\n"
