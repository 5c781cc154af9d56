from studies.kinds import app


class QuestionnaireConfig(app.KindConfig):
    name = "kinds.questionnaire"
    verbose_name = "Questionnaire studies"
