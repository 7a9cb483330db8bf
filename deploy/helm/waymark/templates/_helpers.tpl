{{/* Names and labels. */}}
{{- define "waymark.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "waymark.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "waymark.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "waymark.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "waymark.selectorLabels" -}}
app.kubernetes.io/name: {{ include "waymark.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "waymark.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "waymark.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "waymark.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* PostgreSQL when a URL or a Secret holding one is given; else the embedded SQLite. */}}
{{- define "waymark.postgres" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{- define "waymark.dbSecretName" -}}
{{- .Values.database.existingSecret | default (printf "%s-database" (include "waymark.fullname" .)) }}
{{- end }}

{{- define "waymark.dbSecretKey" -}}
{{- if .Values.database.existingSecret }}{{ .Values.database.existingSecretKey }}{{ else }}database-url{{ end }}
{{- end }}

{{/* The admin key's Secret: one you made, or the chart's (from auth.adminKey); none without either. */}}
{{- define "waymark.authSecretName" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecret }}
{{- else if .Values.auth.adminKey }}{{ printf "%s-admin-key" (include "waymark.fullname" .) }}
{{- end }}
{{- end }}

{{/* The entry of that Secret that holds the key. */}}
{{- define "waymark.authSecretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}admin.key{{ end }}
{{- end }}

{{/* Where each replica reads the admin key (--admin-key-file): the Secret's entry, mounted read-only. */}}
{{- define "waymark.adminKeyDir" -}}/etc/waymark/admin{{- end }}
{{- define "waymark.adminKeyFile" -}}{{ include "waymark.adminKeyDir" . }}/admin.key{{- end }}

{{/* What the settings cannot run as; checked wherever the chart renders. */}}
{{- define "waymark.validate" -}}
{{- if and (not (include "waymark.postgres" .)) (gt (int .Values.replicaCount) 1) }}
{{- fail "replicaCount > 1 needs PostgreSQL (database.url or database.existingSecret): the embedded SQLite database is one pod's volume" }}
{{- end }}
{{- if and .Values.migration.enabled (not (include "waymark.postgres" .)) }}
{{- fail "migration.enabled needs PostgreSQL (database.url or database.existingSecret): a SQLite replica migrates its own file" }}
{{- end }}
{{- if and .Values.auth.enabled (not (include "waymark.authSecretName" .)) }}
{{- fail "auth.enabled needs an admin key. Set auth.existingSecret to a Secret you made (kubectl create secret generic waymark-admin --from-literal=admin.key=\"$(waymark key generate)\"), or auth.adminKey to a key made by `waymark key generate` (the chart then makes the Secret); or set auth.enabled=false" }}
{{- end }}
{{- if and .Values.auth.existingSecret .Values.auth.adminKey }}
{{- fail "auth.existingSecret and auth.adminKey are both set: give the admin key one way" }}
{{- end }}
{{- if and .Values.auth.existingSecret (not .Values.auth.existingSecretKey) }}
{{- fail "auth.existingSecret needs auth.existingSecretKey: the Secret's entry that holds the key (admin.key)" }}
{{- end }}
{{- if and .Values.auth.adminKey (not (regexMatch "^wmk_[0-9a-f]{16}_[0-9a-f]{64}$" (trim .Values.auth.adminKey))) }}
{{- fail "auth.adminKey is not an API key (wmk_<16 hex>_<64 hex>): make one with `waymark key generate`" }}
{{- end }}
{{- end }}

{{/* The database URL, as an environment variable (from the Secret), or the SQLite file. */}}
{{- define "waymark.databaseEnv" -}}
{{- if include "waymark.postgres" . }}
- name: WAYMARK_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "waymark.dbSecretName" . }}
      key: {{ include "waymark.dbSecretKey" . }}
{{- else }}
- name: WAYMARK_DATABASE_URL
  value: sqlite:/data/waymark.db
{{- end }}
{{- end }}

{{/* The server's pods (the migration Job's are component: migrate). */}}
{{- define "waymark.serverSelectorLabels" -}}
{{ include "waymark.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}
