"""The admin's *API tokens* page: the one place in the browser where analysts' API tokens are made (the hashed,
expiring, optionally per-study tokens of analysis/tokens.py, the only kind the API accepts). The key is shown
once, on the page that follows "Save"; the list shows each token's first characters, its study, expiry and last
use, and deleting a row revokes it. DRF's stock *Tokens* page is removed: its tokens were never accepted."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.template.response import TemplateResponse
from rest_framework.authtoken.models import TokenProxy

from analysis.models import AnalystToken
from analysis.permissions import analyst_grant
from analysis.tokens import analyst_token_create

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


class TokenAddForm(forms.ModelForm):
    days = forms.IntegerField(
        min_value=1,
        max_value=3650,
        label="Valid for (days)",
        help_text="The token stops working after this many days; create a new one then.",
    )

    class Meta:
        model = AnalystToken
        fields = ["user", "study"]
        help_texts = {
            "user": "Who the token reads as. Someone who is not staff is added to the Analysts group.",
            "study": "Limit the token to one study (recommended). Blank: every study that is not a draft.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "user" not in self.fields:
            return  # a token's own page: nothing to edit
        self.fields["user"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["days"].initial = settings.ANALYST_TOKEN_DAYS


@admin.register(AnalystToken)
class AnalystTokenAdmin(admin.ModelAdmin):
    form = TokenAddForm
    list_display = ["prefix_shown", "user", "study", "expires_at", "last_used_at", "created_at"]
    list_select_related = ["user", "study"]
    shown = ["prefix", "user", "study", "expires_at", "created_at", "last_used_at"]

    @admin.display(description="Token", ordering="prefix")
    def prefix_shown(self, token: AnalystToken) -> str:
        return f"{token.prefix}…"

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # a token is issued or revoked, never edited

    def get_fields(self, request, obj=None):
        return ["user", "study", "days"] if obj is None else self.shown

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.shown

    def get_changeform_initial_data(self, request):
        return {"user": request.user.pk, **super().get_changeform_initial_data(request)}

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        token, key = analyst_token_create(user=data["user"], study=data["study"], days=data["days"])
        if not data["user"].is_staff:
            analyst_grant(data["user"])
        for field in ("pk", "prefix", "expires_at", "created_at"):
            setattr(obj, field, getattr(token, field))  # for the admin's log and the page that follows
        request.issued_token_key = key

    def response_add(self, request, obj, post_url_continue=None):
        """The key, once: it is not stored, so this page is the only place it is ever shown."""
        context = {
            **self.admin_site.each_context(request),
            "title": "Your new API token",
            "token": obj,
            "key": request.issued_token_key,
            "opts": self.opts,
        }
        return TemplateResponse(request, "admin/analysis/token_issued.html", context)  # never cached (admin)
