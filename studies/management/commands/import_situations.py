from studies.emotionbench.instruments import situations_import
from studies.management.emotionbench_file_command import EmotionBenchFileCommand


class Command(EmotionBenchFileCommand):
    help = "Import the EmotionBench situation pool (situations.json: emotions → factors → situations), all or nothing."
    what = "situations"
    file_help = "A situations.json file."
    load = staticmethod(situations_import)
