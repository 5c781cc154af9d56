from studies.kinds import app


class ChatConfig(app.KindConfig):
    name = "kinds.chat"
    label = "chat"
    verbose_name = "Chat studies (a live conversation, rated afterwards)"
