"""The toy kind's analysis entry (`StudyKind.analysis`): the waves per hand, by condition."""

from collections import Counter

from .models import ToyWave


class ToyAnalysis:
    def analyze(self, study, options):
        waves = ToyWave.objects.filter(participant__study=study, participant__is_preview=False)
        return Counter(waves.values_list("participant__condition__name", "hand"))

    def report_write(self, study, options, out_dir):
        counts = self.analyze(study, options)
        out_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"{condition} {hand}: {n}" for (condition, hand), n in sorted(counts.items())]
        (out_dir / "waves.txt").write_text("\n".join(lines) + "\n")
        return [f"{study.slug}: {sum(counts.values())} waves", *lines]


TOY_ANALYSIS = ToyAnalysis()
