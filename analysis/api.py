"""The read-only REST API for analysts: studies, their aggregates (the analysis summary) and streamed CSV exports.

Only GET (and HEAD/OPTIONS) exist, so a token can read and never write: read-only by construction. Authentication:
a token (`Authorization: Token <key>`, created on the admin's *API tokens* page or with `manage.py analyst_token`: hashed, expiring, optionally limited
to one study, never reading drafts — analysis.tokens) or the admin session; permission: staff or the Analysts
group, as on the dashboard.
"""

from __future__ import annotations

from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import exports, selectors
from analysis.design import design_headers, design_of
from analysis.judge_views import report_for
from analysis.permissions import IsAnalyst
from analysis.services import AnalysisError, study_analyze_cached
from analysis.tokens import token_studies
from analysis.views import download_name, export_response, options_from_query
from studies.kinds import kind_of, resolved
from studies.models import Study

READ_ONLY = ["get", "head", "options"]

ANALYSIS_PARAMETERS = [
    OpenApiParameter(
        "baseline", str, description="Condition to compare against (default: the study's baseline)."
    ),
    OpenApiParameter(
        "exclusions",
        str,
        enum=["default", "none"],
        description="`default`: the rules the study declared before launch; `none`: apply no exclusion rule.",
    ),
]


class ConditionSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    kind = serializers.CharField()
    is_baseline = serializers.BooleanField()


class StudyListSerializer(serializers.ModelSerializer):
    class Meta:
        model = Study
        fields = ["slug", "title", "kind", "state", "created_at", "launched_at", "closed_at"]


class StudyDetailSerializer(serializers.ModelSerializer):
    conditions = ConditionSerializer(many=True, read_only=True)
    scale = serializers.JSONField()
    exclusion_rules = serializers.JSONField(help_text="The exclusion rules the study declared before launch.")
    participants = serializers.SerializerMethodField()
    kind_settings = serializers.SerializerMethodField(
        help_text="The study kind's own settings (a rating study's question, TEQ and ratings aimed for per response)."
    )

    class Meta:
        model = Study
        fields = [
            "slug", "title", "kind", "state", "created_at", "launched_at", "closed_at", "scale",
            "items_per_participant", "kind_settings", "quota_per_condition", "conditions",
            "exclusion_rules", "participants",
        ]  # fmt: skip

    def get_kind_settings(self, study: Study) -> dict | None:
        return kind_of(study).settings_values(study)

    def get_participants(self, study: Study) -> int:
        return study.participants.filter(is_preview=False).count()


class StudyList(generics.ListAPIView):
    """Studies, newest first."""

    permission_classes = [IsAnalyst]
    http_method_names = READ_ONLY
    serializer_class = StudyListSerializer

    def get_queryset(self):
        return token_studies(self.request, selectors.study_list())


class StudyDetail(generics.RetrieveAPIView):
    """One study with its design and conditions."""

    permission_classes = [IsAnalyst]
    http_method_names = READ_ONLY
    serializer_class = StudyDetailSerializer
    lookup_field = "slug"

    def get_queryset(self):
        return selectors.study_list().prefetch_related("conditions")


def _study(slug: str) -> Study:
    try:
        return selectors.study_get_by_slug(slug=slug)
    except Study.DoesNotExist:
        raise Http404("No such study.") from None


class StudyAggregates(APIView):
    """The study's analysis as JSON: distributions, changes against the baseline, every test with raw and
    Holm-corrected p-values, the proportional-odds model, bootstrap intervals, agreement, exclusions."""

    permission_classes = [IsAnalyst]
    http_method_names = READ_ONLY

    @extend_schema(parameters=ANALYSIS_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        study = _study(slug)
        try:
            analysis = study_analyze_cached(study=study, options=options_from_query(request.query_params))
        except AnalysisError as exc:
            raise Http404(str(exc)) from None
        return Response({**analysis.summary(), "design": design_of(study)})


class CSVRenderer(BaseRenderer):
    """Lets `Accept: text/csv` through content negotiation; the view streams the body itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


class CSVView(APIView):
    """A view whose success is a CSV file and whose refusal (401, 403, 404...) is JSON, `{"detail": ...}`, even
    when the client asked for `text/csv`: a refused download is never a CSV file holding the word `detail`."""

    permission_classes = [IsAnalyst]
    http_method_names = READ_ONLY
    renderer_classes = [CSVRenderer, JSONRenderer]

    def finalize_response(self, request, response, *args, **kwargs):
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


class StudyExport(CSVView):
    """A streamed CSV export: `ratings` (long format with exclusion flags), `participants` or `responses`."""

    @extend_schema(
        parameters=[ANALYSIS_PARAMETERS[1]],
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV, streamed")},
    )
    def get(self, request: Request, slug: str, what: str) -> StreamingHttpResponse:
        return export_response(request, _study(slug), what, request.query_params, request.user)


class StudyTable(CSVView):
    """One aggregate table of the analysis as CSV (the same files `analyze` writes: main_tests, tests,
    distribution, distribution_by_valence, distribution_by_emotion, change_vs_baseline..., bootstrap_...,
    ordinal_model, exclusions)."""

    @extend_schema(
        parameters=ANALYSIS_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV")},
    )
    def get(self, request: Request, slug: str, name: str) -> StreamingHttpResponse:
        study = _study(slug)
        try:
            analysis = study_analyze_cached(study=study, options=options_from_query(request.query_params))
        except AnalysisError as exc:
            raise Http404(str(exc)) from None
        tables = analysis.page_tables()
        if name not in tables:
            raise Http404("No such table.")
        response = StreamingHttpResponse(
            exports.table_lines(tables[name]), content_type="text/csv; charset=utf-8"
        )
        filename = download_name(analysis.study_slug, f"{name}.csv", request.query_params)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return design_headers(response, study)


class StudyJudgeReport(APIView):
    """One LLM judge's report on the study: the verdict, its run (done, pending, failed, spend), agreement with
    people beside people's with each other, the confusion matrix, by valence and emotion, the alternative annotator
    test, bias checks, prediction-powered shares beside human-only ones, and the screening of unrated conditions."""

    permission_classes = [IsAnalyst]
    http_method_names = READ_ONLY

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str, judge: str) -> Response:
        return Response(report_for(slug, judge).summary())


class StudyPairwiseFile(CSVView):
    """One output file of a pairwise study's analysis (the analysts' page's: bt_scores.csv, win_matrix.csv,
    win_rates.csv, position_bias.csv, agreement.csv, summary.json, drift.csv for a wave, the figures)."""

    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the file")})
    def get(self, request: Request, slug: str, name: str):
        study = _study(slug)
        files = kind_of(study).analysis_file  # the kind's own analysis files, when it writes any
        if files is None:
            raise Http404("No pairwise analysis for this study.")
        return design_headers(resolved(files)(study, name), study)
