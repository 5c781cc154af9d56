{{- define "empathy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "empathy.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "web") */}}
{{- define "empathy.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "empathy.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "empathy.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "empathy.fullname" .)) -}}
{{- end -}}

{{- define "empathy.databaseSecret" -}}
{{- if .Values.postgresql.enabled -}}
{{ include "empathy.fullname" . }}-postgresql
{{- else -}}
{{ required "externalDatabase.existingSecret is required when postgresql.enabled=false" .Values.externalDatabase.existingSecret }}
{{- end -}}
{{- end -}}

{{- define "empathy.databaseSecretKey" -}}
{{- if .Values.postgresql.enabled -}}database-url{{- else -}}{{ .Values.externalDatabase.existingSecretKey }}{{- end -}}
{{- end -}}

{{- define "empathy.redisSecret" -}}
{{- if .Values.redis.enabled -}}
{{ include "empathy.fullname" . }}-redis
{{- else -}}
{{ required "externalRedis.existingSecret is required when redis.enabled=false" .Values.externalRedis.existingSecret }}
{{- end -}}
{{- end -}}

{{- define "empathy.redisSecretKey" -}}
{{- if .Values.redis.enabled -}}redis-url{{- else -}}{{ .Values.externalRedis.existingSecretKey }}{{- end -}}
{{- end -}}

{{- define "empathy.allowedHosts" -}}
{{- .Values.config.allowedHosts | default .Values.ingress.hosts | join "," -}}
{{- end -}}

{{- define "empathy.csrfOrigins" -}}
{{- $origins := list -}}
{{- range .Values.ingress.hosts }}{{ $origins = append $origins (printf "https://%s" .) }}{{ end -}}
{{- .Values.config.csrfTrustedOrigins | default $origins | join "," -}}
{{- end -}}

{{/* The environment of every application container (web, workers, beat, migrations). */}}
{{- define "empathy.env" -}}
- name: DJANGO_ENV
  value: production
- name: SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "empathy.secretName" . }}, key: SECRET_KEY}}
- name: PROVIDER_KEYS_SECRET
  valueFrom: {secretKeyRef: {name: {{ include "empathy.secretName" . }}, key: PROVIDER_KEYS_SECRET, optional: true}}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ include "empathy.databaseSecret" . }}, key: {{ include "empathy.databaseSecretKey" . }}}}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ include "empathy.redisSecret" . }}, key: {{ include "empathy.redisSecretKey" . }}}}
- name: ALLOWED_HOSTS
  value: {{ include "empathy.allowedHosts" . | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ include "empathy.csrfOrigins" . | quote }}
- name: SECURE_SSL_REDIRECT
  value: {{ .Values.config.secureSslRedirect | quote }}
- name: LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: RATELIMIT_TRUSTED_PROXIES
  value: {{ .Values.config.ratelimitTrustedProxies | quote }}
- name: GENERATION_QUEUE
  value: {{ .Values.workers.generation.queue | quote }}
- name: FILE_STORAGE
  value: {{ .Values.config.storage.backend | quote }}
{{- if eq .Values.config.storage.backend "s3" }}
- name: AWS_STORAGE_BUCKET_NAME
  value: {{ required "config.storage.bucket is required with the s3 storage" .Values.config.storage.bucket | quote }}
- name: AWS_S3_ENDPOINT_URL
  value: {{ .Values.config.storage.endpointUrl | quote }}
- name: AWS_S3_REGION_NAME
  value: {{ .Values.config.storage.region | quote }}
- name: AWS_ACCESS_KEY_ID
  valueFrom: {secretKeyRef: {name: {{ required "config.storage.existingSecret is required with the s3 storage" .Values.config.storage.existingSecret }}, key: AWS_ACCESS_KEY_ID}}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.config.storage.existingSecret }}, key: AWS_SECRET_ACCESS_KEY}}
{{- end }}
{{- range $name, $value := .Values.config.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* A pod's shared parts: security context, pull secrets. */}}
{{- define "empathy.podCommon" -}}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Scratch space for a read-only root filesystem (request-time temporary files, beat's schedule). */}}
{{- define "empathy.tmpVolume" -}}
- name: tmp
  emptyDir: {sizeLimit: 256Mi}
{{- end -}}
{{- define "empathy.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Waits (never migrates) until the schema is current: pods never serve or work on an older schema. */}}
{{- define "empathy.waitForMigrations" -}}
- name: wait-for-migrations
  image: {{ include "empathy.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["sh", "-c", "until python manage.py migrate --check >/dev/null; do echo waiting for migrations; sleep 5; done"]
  env:
    {{- include "empathy.env" . | nindent 4 }}
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  resources:
    {{- toYaml .Values.migrations.resources | nindent 4 }}
  volumeMounts:
    {{- include "empathy.tmpMount" . | nindent 4 }}
{{- end -}}
