"""EmotionBench as data: instruments, situations and the published results, imported atomically.

Modules: `data` (the eight emotions, the import error, text matching), `instruments` (questionnaires.json and
situations.json), `results_parse` (the published answer files, read and checked), `results` (writing them as a
questionnaire study).

Every import validates the whole file before writing anything; a problem is reported with where it is
(file, JSON path, row and column, or spreadsheet cell) and nothing is half imported. Re-importing the same
file changes nothing.

Published results and situations (a decision, documented in docs/emotionbench.md): the result files name a
situation `Emotion-k_scenario-s` (0-based factor k, 0-based position s in the paper's selection of at most 5
per factor) and show its text in row 0. The position s is NOT the situation's position in situations.json, and
some texts were edited for the runs. So a published situation is matched to the pool by its text (whitespace
normalised) within the emotion and factor the column names; when no pool situation of that factor has that
text, the text that was shown becomes a new situation of that factor (appended after the pool's own). The
paper's grouping (by the factor in the column name) and the text the subjects really saw are both kept.
"""
