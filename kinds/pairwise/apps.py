from studies.kinds import app


class PairwiseConfig(app.KindConfig):
    name = "kinds.pairwise"
    verbose_name = "Pairwise studies"
