from studies.emotionbench.instruments import instruments_import
from studies.management.emotionbench_file_command import EmotionBenchFileCommand


class Command(EmotionBenchFileCommand):
    help = "Import questionnaires (e.g. EmotionBench's questionnaires.json: PANAS and eight scales), all or nothing."
    what = "instruments"
    file_help = "A questionnaires.json file."
    load = staticmethod(instruments_import)
