"""The chat kind's planned analysis (`StudyKind.analysis_plan`, frozen with the design and printed by the
pre-registration): kinds/chat/analysis.py reports each test under its key, the primary first."""

from studies.kinds.base import AnalysisPlan, PlannedTest

CHAT_PLAN = AnalysisPlan(
    primary=PlannedTest(
        "interaction",
        "source × label interaction on the PETS total (0–100): whether the difference between the sources differs "
        "by the label shown; OLS on the cells with HC3 standard errors, Wald F; one conversation per participant",
    ),
    secondary=(
        PlannedTest(
            "source", "source effect on the PETS total, averaged over the labels, with its 95 % interval"
        ),
        PlannedTest("label", "label effect on the PETS total, averaged over the sources"),
        PlannedTest(
            "factors",
            "the same tests on the two PETS factors (Emotional Responsiveness, Understanding & Trust)",
        ),
        PlannedTest("scale", "the same tests on the study's own scale (score, and the top answer's share)"),
    ),
)
