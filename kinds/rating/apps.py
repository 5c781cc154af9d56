from studies.kinds import app


class RatingConfig(app.KindConfig):
    name = "kinds.rating"
    verbose_name = "Rating studies"
